"""`forecast monitor`, `upgrade-log` and `retrain`: the forecast log the service writes, read
(monitoring/), and the served model retrained on its data extended to the latest actuals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forecaster.model_uri import DEFAULT_MODEL_URI
from pipelines.commands.common import (
    AllowWorseThanNaive,
    ForecastLogUrl,
    Quiet,
    TrackingUri,
    forecast_log_url,
    print_json,
    split_settings,
    user_errors,
)
from pipelines.commands.reports import report_training
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS

if TYPE_CHECKING:
    from pipelines.retrain import Retraining


@user_errors
def monitor(
    forecast_log: ForecastLogUrl = None,
    window: Annotated[
        int | None, typer.Option(min=1, help="resolved steps per model version (default: $MONITOR_WINDOW)")
    ] = None,
    series_id: Annotated[str | None, typer.Option(help="the figures of this series only")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print GET /v1/monitor's document instead")] = False,
) -> None:
    """Live forecast quality from the forecast log: MAE, RMSE, MASE, skill against naive and
    seasonal naive, interval coverage, per model version and horizon step, and the status."""
    from infra.redaction import redact
    from monitoring.settings import MonitoringSettings
    from pipelines.monitor import print_monitor, read_monitor

    url = forecast_log_url(forecast_log)
    document = read_monitor(url, MonitoringSettings(), window, series_id=series_id)
    if as_json:
        print_json(document)
        return
    print_monitor(document, redact(url) or "")


@user_errors
def upgrade_log(forecast_log: ForecastLogUrl = None) -> None:
    """Migrate the forecast log to this version's layout (the service does it when it starts; this
    is for a log read before any new service touched it, or to migrate before a deployment)."""
    from infra.redaction import redact
    from monitoring.database import upgrade

    url = forecast_log_url(forecast_log)
    revision = upgrade(url)
    print(f"the forecast log {redact(url)} is at revision {revision}")


@user_errors
def retrain(
    model_uri: Annotated[
        str,
        typer.Option(envvar="MODEL_URI", help="the served alias, models:/NAME@ALIAS (default: $MODEL_URI)"),
    ] = DEFAULT_MODEL_URI,
    if_degraded: Annotated[
        bool, typer.Option("--if-degraded", help="only when the monitor says degraded")
    ] = False,
    forecast_log: ForecastLogUrl = None,
    series_id: Annotated[
        str | None, typer.Option(help="which logged series (when it forecast several)")
    ] = None,
    split: Annotated[str | None, typer.Option(help="train,val,test fractions for the extended data")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE, as for train")] = None,
    data_dir: Annotated[
        str, typer.Option(help="where the extended series is written and kept")
    ] = DEFAULTS.retrain_data_dir,
    as_json: Annotated[bool, typer.Option("--json", help="end with one JSON line")] = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    quiet: Quiet = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Retrain the served model's config on its data extended to the latest actuals in the forecast
    log, and register the new version through the promotion gate."""
    from forecaster.model_uri import check_model_uri

    check_model_uri(model_uri)
    from monitoring.settings import MonitoringSettings
    from pipelines.console import console
    from pipelines.retrain import retrain as run_retrain
    from pipelines.tracking import connect, reads_the_store, resolve_tracking_uri

    uri = connect(resolve_tracking_uri(tracking_uri), existing=reads_the_store(model_uri))
    result = run_retrain(
        model_uri,
        forecast_log_url(forecast_log),
        uri,
        MonitoringSettings(),
        if_degraded=if_degraded,
        series_id=series_id,
        split=split_settings(split) if split else None,
        data_dir=data_dir,
        overrides=overrides,
        quiet=quiet,
        allow_worse_than_naive=allow_worse_than_naive,
    )
    reasons = "; ".join(result.reasons)
    status = f"{result.model_uri} (version {result.version}): {result.status}" + (
        f" ({reasons})" if reasons else ""
    )
    if not result.retrained:
        console.print(f"{status}; not retrained" + (f": {result.note}" if result.note else ""))
    else:
        console.print(status)
        console.print(
            f"retrained on {result.rows} rows ({result.actuals} actuals from the log), "
            f"written to {result.data_path}"
        )
    for line in left_out_lines(result):
        console.print(line)
    if result.retrained:
        report_training(result.outcome, result.model_uri.rsplit("@", 1)[1], as_json=False)
    if as_json:
        print_json(result.as_json())


def left_out_lines(result: Retraining) -> list[str]:
    """Why some actuals did not go into the retrain: inside the model's own data (the corrections
    among them said apart, with how to train on them), or off its grid."""
    lines = []
    if result.left_out:
        lines.append(left_out_line(result.left_out, result.data_end, result.corrections or 0))
    if result.off_grid:
        lines.append(
            f"{result.off_grid} actuals after {result.data_end} left out: off the model's grid (steps "
            "of another model's forecasts, which they score)"
        )
    return lines


def left_out_line(left_out: int, data_end: str | None, corrections: int = 0) -> str:
    """Why some actuals did not go into the retrain: they lie in the model's own data."""
    line = (
        f"{left_out} actuals from the log left out: at or before {data_end}, inside the data the "
        "model was trained on, whose values are kept (its history is not rewritten by the log)"
    )
    if corrections:
        line += (
            f"; {corrections} of them differ from the model's value there: corrections are not "
            "taken by retrain; to train on corrected data, correct the file and run `forecast train` on it"
        )
    return line
