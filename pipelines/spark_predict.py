"""`forecast predict --engine spark`: the batch forecast of a panel on Apache Spark.

A recurrent model reads each series' whole recent window, so the job is
``groupBy(id).applyInPandas``: each group is one series, loaded by the same strict rules as
in-process (forecaster.data.loading) and forecast by the same registered pyfunc model. The model
is downloaded once by the driver and shipped to the executors with ``SparkContext.addFile``, as
MLflow's own ``spark_udf`` does, so the executors need no access to the tracking server. Pointed
at a cluster (``--spark-master spark://host:7077``, or yarn / k8s://...), the same command runs the
nightly batch there; the panel file must then be readable by every executor (a shared or object
store path). The executors need this package and its dependencies installed (the Docker image
has them).

Rows are counted within each series in the reasons a series is left out: Spark does not keep a
file's row numbers."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.data.loading import series_from_table
from forecaster.errors import ConfigError, DataError
from forecaster.model_data import data_config_for, frequency_given
from forecaster.next_steps import check_predictable, next_steps
from forecaster.predictor import Predictor
from forecaster.pyfunc import load_predictor
from pipelines.predict import Forecasts, model_version

ERROR = "_error"  # the column a group's rows carry its reason in, when the series was left out


@lru_cache(maxsize=2)
def executor_predictor(model_dir: str) -> Predictor:
    """The model, loaded once per executor process from the copy Spark shipped."""
    return load_predictor(model_dir)


def forecast_on_spark(model_uri: str, overrides: dict[str, Any], master: str) -> Forecasts:
    try:
        from pyspark import SparkFiles
        from pyspark.sql import SparkSession
    except ImportError:
        raise ConfigError(
            "--engine spark needs pyspark: pip install -c requirements.lock '.[spark]'"
        ) from None
    import mlflow

    started = time.perf_counter()
    predictor = check_predictable(load_predictor(model_uri), model_uri)
    data = data_config_for(predictor, overrides)
    if data.id_column is None or data.path is None and data.dataset is None:
        raise ConfigError("--engine spark forecasts a panel: give --data FILE and --id-column")
    from forecaster.data.datasets import get_dataset

    spec = None if data.dataset is None else get_dataset(data.dataset)
    path = str(Path(data.path or spec.path).absolute())
    time_column = data.time_column or spec.time_column
    target = data.target or spec.target
    version = model_version(model_uri)
    columns = [target, *predictor.features[1:]]
    builder = SparkSession.builder.master(master)
    if master.startswith("local"):  # the workers run this interpreter (its packages); a cluster has its own
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        builder.appName("forecast predict")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # its stage bars are frames in any log
        # PySpark 4.3 warns, in every Python worker, that it does not fully support pandas 3: the
        # grouped-map path used here round-trips (tests/pipelines/test_many_series.py)
        .config("spark.executorEnv.PYTHONWARNINGS", "ignore::FutureWarning")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="forecast-model-") as scratch:
        local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=scratch)
        spark.sparkContext.addFile(local, recursive=True)
        shipped = Path(local).name
        table = read_table(spark, path, [data.id_column, time_column, *columns])
        settings: dict[str, Any] = {
            "path": path, "id_column": data.id_column, "time_column": time_column, "target": target,
            "covariates": predictor.features[1:], "frequency": predictor.frequency, "fill": data.fill,
            "duplicates": data.duplicates, "version": version, "model": shipped, "timezone": data.timezone,
            "time_format": data.time_format, "frequency_given": frequency_given(predictor),
        }  # fmt: skip
        fields = output_fields(data.id_column, time_column, target, predictor)
        settings["fields"] = fields
        schema = ", ".join(f"`{name}` {kind}" for name, kind in fields)

        def forecast_group(rows: pd.DataFrame) -> pd.DataFrame:
            return forecast_one(rows, SparkFiles.get(settings["model"]), settings)

        grouped = table.groupBy(data.id_column).applyInPandas(forecast_group, schema=schema)
        try:
            result = grouped.toPandas()
        except Exception as exc:  # a Py4J or Python worker error: pages of Java; its last line says why
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raise DataError(f"the Spark job failed: {lines[-1] if lines else type(exc).__name__}") from None
    frame = result[result[ERROR].isna()].drop(columns=[ERROR])
    frame = frame.sort_values([data.id_column, time_column], ignore_index=True)
    frame[time_column] = pd.to_datetime(frame[time_column]).dt.tz_localize(None)
    failed = result[result[ERROR].notna()]
    skipped = dict(sorted(zip(failed[data.id_column], failed[ERROR], strict=True)))
    series = frame[data.id_column].nunique()
    return Forecasts(frame, skipped, series, time.perf_counter() - started)


def read_table(spark: Any, path: str, columns: list[str]) -> Any:
    """The panel as strings (the loader parses them, as in-process); a missing column is named."""
    if Path(path).suffix.lower() in {".parquet", ".pq"}:
        table = spark.read.parquet(path)
    else:
        table = spark.read.option("header", "true").csv(path)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(
            f"{path}: column(s) {missing} not found; available columns: {', '.join(table.columns)}"
        )
    return table.select(*(table[c].cast("string").alias(c) for c in columns))


def output_fields(
    id_column: str, time_column: str, target: str, predictor: Predictor
) -> list[tuple[str, str]]:
    """The job's columns and their Spark types: what the local engine writes, and the reason."""
    fields = [(id_column, "string"), (time_column, "timestamp"), (f"{target}_forecast", "double")]
    fields += [(f"{target}_q{level:g}", "double") for level in sorted(predictor.quantile_levels)]
    return [*fields, ("model_version", "string"), (ERROR, "string")]


def forecast_one(rows: pd.DataFrame, model_dir: str, settings: dict[str, Any]) -> pd.DataFrame:
    """One series' rows -> its forecast rows, or one row carrying why it was left out."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per Spark task
    predictor = executor_predictor(model_dir)
    key = str(rows[settings["id_column"]].iloc[0]).strip()
    try:
        series = series_from_table(
            rows.reset_index(drop=True), f"{settings['path']} (series {key!r})", Path(settings["path"]),
            settings["time_column"], settings["target"], list(settings["covariates"]), [],
            settings["frequency"], settings["fill"], settings["duplicates"], series_id=key, sha256="-",
            timezone=settings["timezone"], time_format=settings["time_format"],
            model_frequency=settings["frequency"], model_frequency_given=settings["frequency_given"],
        )  # fmt: skip
        frame = next_steps(predictor, series)
    except DataError as exc:  # one row: the series and why, the forecast columns empty
        return left_out(key, str(exc), settings["fields"])
    frame.insert(0, settings["id_column"], key)
    return frame.assign(
        model_version=settings["version"], **{ERROR: np.array([None] * len(frame), dtype=object)}
    )


EMPTY = {"string": ("object", None), "timestamp": ("datetime64[ns]", pd.NaT), "double": ("float64", np.nan)}


def left_out(key: str, reason: str, fields: list[tuple[str, str]]) -> pd.DataFrame:
    """The row a series left out returns: its id and why, every other column empty (typed, as
    Arrow converts the group's frame by the schema)."""
    columns = {name: pd.Series([EMPTY[kind][1]], dtype=EMPTY[kind][0]) for name, kind in fields}
    columns[fields[0][0]] = pd.Series([key], dtype=object)
    columns[ERROR] = pd.Series([reason], dtype=object)
    return pd.DataFrame(columns)
