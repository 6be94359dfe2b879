"""`forecast predict`: the next H steps of a series or of every series of a panel, offline, in
this process (pipelines/predict.py) or on Apache Spark (pipelines/spark_predict.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from forecaster.options import data_settings
from pipelines.commands.common import TrackingUri, user_errors
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS


@user_errors
def predict(
    model_uri: Annotated[str, typer.Option()],
    data: Annotated[str, typer.Option(help="dataset name or CSV/Parquet file holding the recent history")],
    time_column: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option()] = None,
    id_column: Annotated[
        str | None, typer.Option(help="long format: the series-id column; every series is forecast")
    ] = None,
    time_format: Annotated[
        str | None,
        typer.Option(
            help="the time column's date format, e.g. '%d/%m/%Y' (default: the model's, or the file's)"
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option(help="write the forecasts to this .csv or .parquet file (by its extension)")
    ] = None,
    engine: Annotated[
        str, typer.Option(help="local (this process) or spark (Apache Spark; pip install '.[spark]')")
    ] = DEFAULTS.predict_engine,
    spark_master: Annotated[
        str, typer.Option(help="with --engine spark: the master URL, e.g. local[2] or spark://host:7077")
    ] = DEFAULTS.spark_master,
    tracking_uri: TrackingUri = None,
) -> None:
    """Forecast the next H steps after the end of a series, or of every series of a panel,
    offline. Series that cannot be forecast are named, with why, and the others forecast."""
    from forecaster.data.header import check_given_columns
    from forecaster.errors import ConfigError
    from forecaster.model_uri import check_model_uri

    if engine not in ("local", "spark"):
        raise ConfigError(f"--engine {engine!r}: local or spark")
    check_model_uri(model_uri)  # before MLflow and torch are imported: seconds, not a minute
    settings = data_settings(data, time_column, target, id_column=id_column, time_format=time_format)
    check_given_columns(settings)
    if output:
        from pipelines.predict import output_format

        output_format(output)  # a wrong extension is said before minutes of work
    from pipelines.console import console
    from pipelines.predict import forecast_next, write_forecasts
    from pipelines.tracking import connect, reads_the_store, resolve_tracking_uri

    connect(resolve_tracking_uri(tracking_uri), existing=reads_the_store(model_uri))
    if engine == "spark":
        from pipelines.spark_predict import forecast_on_spark

        forecasts = forecast_on_spark(model_uri, settings, spark_master)
    else:
        forecasts = forecast_next(model_uri, settings)
    if not output:
        print(forecasts.frame.to_string(index=False))
    skipped_file = write_forecasts(forecasts, output, id_column) if output else None
    if output:
        console.print(
            f"wrote {len(forecasts.frame)} forecast rows ({forecasts.series} series) to {output} "
            f"in {forecasts.seconds:.1f} s ({engine})"
        )
    if forecasts.skipped:
        shown = list(forecasts.skipped.items())[:SKIPPED_SHOWN]
        console.print(f"{len(forecasts.skipped)} series not forecast:", markup=False)
        for key, reason in shown:  # the reason without the file and series the line already names
            said = reason.split(f"(series {key!r}): ", 1)[-1]
            console.print(f"  {key}: {said}", markup=False, soft_wrap=True)
        if len(forecasts.skipped) > len(shown):
            where = f" (all of them in {skipped_file})" if skipped_file else ""
            console.print(f"  ... and {len(forecasts.skipped) - len(shown)} more{where}", markup=False)
        elif skipped_file:
            console.print(f"  (also in {skipped_file})", markup=False)


SKIPPED_SHOWN = 10
