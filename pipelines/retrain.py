"""`forecast retrain`: train the serving model's config again on its data extended to the latest
actuals in the forecast log, and register the result through the promotion gate.

The extended series: the model's own data, extended with every actual the log holds for the
series after that data's last timestamp and on the model's grid from it. A gap between the two
(the days between the data's end and the first actual, a day no actual was posted for) is left
to the model's fill policy (``data.fill``), as in training: interpolated or carried forward; a
model trained without one refuses the extended data in its training run, the gap named ("N
missing 'D' step(s), first at ..."): post the missing actuals, or retrain with
``--set data.fill=interpolate``. The log takes an actual at any step of the series' grid up to
a horizon past its latest forecast (monitoring/grid.py), and at a step of any logged forecast of
the series (another model's, another frequency's), so some may lie inside the model's data (a
value posted for a day the model was trained on, a test or a replay of its history) or off its
grid. Neither is taken: what the model was trained on is its history, and one actual posted over
it (1985-06-01 as 99 degrees) would change a model silently; retrain says how many it left out,
and how many of those differ from the model's value there (corrections, which retrain does not
take: `forecast train` on a corrected file does). It is written to a CSV under ``--data-dir``
and kept there: the new version's config points at it, and the promotion gate reloads a model's
data to know what it was fitted on. Actuals that all lie inside the model's data leave nothing
to retrain on: said, and not an error (a cron's `forecast retrain --if-degraded` succeeds).

With ``--if-degraded`` nothing is trained unless the monitor's status of the version the alias
points at is ``degraded`` (thresholds from the settings: MONITOR_*)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, select

from forecaster.data.loading import LoadedSeries
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError
from forecaster.model_data import data_config_for
from forecaster.model_uri import ALIAS_URI
from forecaster.pyfunc import load_predictor
from infra.redaction import redact
from monitoring.actuals import observed
from monitoring.database import open_for_reading
from monitoring.grid import Grid
from monitoring.schema import forecasts
from monitoring.settings import MonitoringSettings
from pipelines.config import RunConfig, apply_override
from pipelines.evaluate import resolve_model_uri
from pipelines.monitor import read_monitor
from pipelines.train import TrainingOutcome, run_training


@dataclass
class Retraining:
    model_uri: str
    version: str  # the version the alias pointed at
    status: str
    reasons: list[str]
    retrained: bool
    data_path: str | None = None
    rows: int | None = None
    actuals: int | None = None
    left_out: int | None = None  # actuals at or before the model's data's end (not taken)
    corrections: int | None = None  # of those, how many differ from the model's value there
    off_grid: int | None = None  # actuals after it but off the model's grid (not taken)
    data_end: str | None = None  # that end, ISO 8601
    note: str | None = None  # why nothing was retrained, when the monitor did not decide it
    outcome: TrainingOutcome | None = field(default=None, repr=False)

    def as_json(self) -> dict[str, Any]:
        document = {k: v for k, v in self.__dict__.items() if k != "outcome"}
        if self.outcome is not None:
            document["training"] = self.outcome.as_json()
        return document


def logged_series(connection: Connection, model_name: str) -> str:
    """The one series the model's logged forecasts name (else say which to choose from)."""
    query = select(forecasts.c.series_id).where(forecasts.c.model_name == model_name).distinct()
    names = sorted(connection.execute(query).scalars().all())
    if not names:
        raise ConfigError(f"the forecast log holds no forecasts of {model_name!r}")
    if len(names) > 1:
        shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
        raise ConfigError(f"{model_name!r} forecast {len(names)} series ({shown}): give --series-id")
    return names[0]


def latest_actuals(connection: Connection, series_id: str) -> pd.Series:
    latest = observed(connection, series_id)
    if latest.empty:
        raise ConfigError(f"the forecast log holds no actuals of series {series_id!r}")
    return latest


@dataclass
class Extension:
    """The model's data extended with the log's actuals, and what was left out of it."""

    series: pd.Series
    taken: int  # actuals after the data's end, on its grid
    left_out: int  # actuals at or before the data's end: the model's values stand
    corrections: int  # of those, the ones that differ from the model's value there
    off_grid: int  # actuals after the end, off the model's grid (another model's forecast steps)

    @property
    def nothing_new(self) -> bool:
        return self.taken == 0


def extended_series(original: pd.Series, latest: pd.Series, frequency: str | None = None) -> Extension:
    """``original`` extended with the actuals of ``latest`` after its last timestamp (on the
    ``frequency`` grid from it, when given). Actuals at or before it are left out (the model's
    history keeps its values), and counted, with how many of them differ from the model's value
    at their time (or fall where its data has none): corrections retrain does not take."""
    end = original.index.max()
    inside = latest[latest.index <= end]
    newer = latest[latest.index > end]
    off = np.zeros(len(newer), bool)
    if frequency is not None and len(newer):
        times = newer.index.to_numpy().astype("datetime64[us]")
        off = Grid(frequency).off(times, np.full(len(times), np.datetime64(end, "us")))
    kept = newer[~off]
    extended = pd.concat([original, kept]).sort_index() if len(kept) else original
    return Extension(extended, len(kept), len(inside), corrections(original, inside), int(off.sum()))


def corrections(original: pd.Series, inside: pd.Series) -> int:
    """How many of ``inside`` (actuals within the model's data) differ from its values there."""
    held = original[~original.index.duplicated()].reindex(inside.index).to_numpy(dtype=float)
    given = inside.to_numpy(dtype=float)
    return int((~np.isclose(given, held, rtol=1e-9, atol=0.0)).sum())


def nothing_new(result: Retraining, latest: pd.Series, end: pd.Timestamp, extension: Extension) -> Retraining:
    """The result when every actual lies inside the model's data (or off its grid): nothing to
    retrain on, said, not raised (a cron's `forecast retrain --if-degraded` must not fail)."""
    result.left_out, result.corrections = extension.left_out, extension.corrections
    result.off_grid, result.data_end = extension.off_grid, end.isoformat()
    result.note = (
        f"nothing new to retrain on: every one of the {len(latest)} actuals in the forecast log is at or "
        f"before {end.isoformat()}, where the model's own data ends"
        + (", or off its grid" if extension.off_grid else "")
        + " (actuals inside the data the model was trained on do not replace it)"
    )
    return result


def retrain(
    model_uri: str,
    log_url: str,
    tracking_uri: str,
    settings: MonitoringSettings,
    if_degraded: bool = False,
    series_id: str | None = None,
    split: dict[str, Any] | None = None,
    data_dir: str | Path = "retrain-data",
    overrides: list[str] | None = None,
    quiet: bool = False,
    allow_worse_than_naive: bool = False,
) -> Retraining:
    alias = ALIAS_URI.match(model_uri)
    if alias is None:
        raise ConfigError(f"{model_uri}: retrain takes the served alias, models:/NAME@ALIAS")
    resolved = resolve_model_uri(model_uri)
    assert resolved is not None
    document = read_monitor(log_url, settings, serving=(resolved.name, resolved.version))
    result = Retraining(model_uri, resolved.version, document["status"], document["reasons"], False)
    if if_degraded and document["status"] != "degraded":
        return result
    predictor = load_predictor(resolved.pinned_uri)
    if len(predictor.features) > 1:
        raise ConfigError(
            f"{model_uri} reads covariates ({', '.join(predictor.features[1:])}); the forecast log holds "
            "only the target: retrain it with `forecast train` on data that has them"
        )
    engine = open_for_reading(log_url)
    try:
        with engine.connect() as connection:
            series_id = series_id or logged_series(connection, resolved.name)
            latest = latest_actuals(connection, series_id)
    finally:
        engine.dispose()
    loaded = load_from_config(data_config_for(predictor, {}))  # on the model's clock
    if not isinstance(loaded, LoadedSeries):  # a panel: its series are not extended one by one here
        raise ConfigError(f"{model_uri}: a panel model is retrained with `forecast train` on its file")
    target = loaded.target
    extension = extended_series(loaded.frame[target], latest, predictor.frequency)
    end = loaded.frame.index.max()
    if extension.nothing_new:
        return nothing_new(result, latest, end, extension)
    extended = extension.series
    path = write_series(extended, target, Path(data_dir), f"{resolved.name}-v{resolved.version}-{series_id}")
    config = retrain_config(predictor.config.model_dump(mode="json"), path, target, predictor.frequency)
    config["data"]["timezone"] = predictor.clock  # the written times are wall times on it: keep it
    run_config = with_settings(
        config, split, overrides, resolved.name, alias["alias"], allow_worse_than_naive
    )
    result.retrained = True
    result.data_path, result.rows, result.actuals = str(path), len(extended), extension.taken
    result.left_out, result.corrections = extension.left_out, extension.corrections
    result.off_grid, result.data_end = extension.off_grid, end.isoformat()
    result.outcome = run_training(run_config, tracking_uri, quiet=quiet)
    return result


def write_series(series: pd.Series, target: str, directory: Path, stem: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
    path = directory / f"{safe}-{datetime.now(UTC):%Y%m%dT%H%M%S}.csv"
    frame = pd.DataFrame({"time": series.index, target: series.to_numpy()})
    frame.to_csv(path, index=False, date_format="%Y-%m-%dT%H:%M:%S")
    return path.resolve()


def retrain_config(config: dict[str, Any], path: Path, target: str, frequency: str) -> dict[str, Any]:
    """The serving model's config, reading the extended series instead of its own data."""
    data = dict(config["data"])
    data.update(dataset=None, path=str(path), time_column="time", target=target, covariates=[])
    data["frequency"] = frequency
    return {**config, "data": data}


def with_settings(
    config: dict[str, Any],
    split: dict[str, Any] | None,
    overrides: list[str] | None,
    name: str,
    alias: str,
    allow_worse_than_naive: bool = False,
) -> RunConfig:
    if config["split"].get("val_start") is not None and not split:
        raise ConfigError(
            "the served model was split by dates, which would put every new actual into its test "
            "period: give --split train,val,test fractions for the extended data"
        )
    if split:
        config["split"] = {**config["split"], **split, "val_start": None, "test_start": None, "end": None}
    for assignment in overrides or []:  # --set model.hidden_size=64, as `forecast train` takes them
        apply_override(config, assignment)
    tracking = {
        "experiment": "retrain",
        "registered_model": name,
        "alias": alias,
        # the gate's naive bar holds for a retrain too unless this retrain waives it (the served
        # model's own waiver, if it had one, is not inherited)
        "allow_worse_than_naive": allow_worse_than_naive,
    }
    try:
        return RunConfig.model_validate({**config, "tracking": tracking})
    except Exception as exc:  # pydantic's ValidationError: one line
        raise ConfigError(f"the retraining config is invalid: {redact(str(exc))}") from None
