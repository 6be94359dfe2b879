"""`forecast predict`: the next H steps after the end of a series, or of every series of a panel,
offline (forecaster/next_steps.py's rows, as the Python API's ``Forecaster.predict`` gives them),
and the model version that made them.

A panel (``--id-column``) is forecast in batches: the last L rows of every series that loads go
through the network a few thousand windows at a time. A series that cannot be forecast (too
short, a gap, another frequency than the model's, a value that is not a number) is named with the
reason and left out; the others are forecast. The same job runs on Apache Spark with ``--engine spark``
(pipelines/spark_predict.py), one series per group."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.data.panel import LoadedPanel
from forecaster.errors import ConfigError
from forecaster.model_data import data_config_for, load_model_data
from forecaster.next_steps import check_predictable, forecast_loaded
from forecaster.pyfunc import load_predictor
from pipelines.evaluate import resolve_model_uri

OUTPUT_FORMATS = {".csv": "CSV", ".parquet": "Parquet", ".pq": "Parquet"}


@dataclass
class Forecasts:
    """What `forecast predict` writes: one row per series and step (a panel's id column first),
    and the series it left out with why."""

    frame: pd.DataFrame
    skipped: dict[str, str] = field(default_factory=dict)
    series: int = 1
    seconds: float = 0.0


def forecast_next(model_uri: str, overrides: dict[str, Any]) -> Forecasts:
    """The next H steps of one series, or of every series of a panel (forecaster/next_steps.py,
    as ``Forecaster.predict``), stamped with the model version."""
    started = time.perf_counter()
    predictor = check_predictable(load_predictor(model_uri), model_uri)
    version = model_version(model_uri)
    loaded = load_model_data(predictor, data_config_for(predictor, overrides), skip_bad_series=True)
    frame, skipped = forecast_loaded(predictor, loaded)
    series = 1
    if isinstance(loaded, LoadedPanel):  # those forecast: the loaded members less the too short
        series = len(loaded.members) - (len(skipped) - len(loaded.skipped))
    return Forecasts(frame.assign(model_version=version), skipped, series, time.perf_counter() - started)


def model_version(model_uri: str) -> str:
    """What the forecasts are stamped with: the registered version (``name/3``) an alias or
    version URI resolves to, else the URI itself (a run's model)."""
    resolved = resolve_model_uri(model_uri)
    return model_uri if resolved is None else f"{resolved.name}/{resolved.version}"


def output_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ConfigError(f"--output {path}: write a .csv or .parquet file")
    return OUTPUT_FORMATS[suffix]


def write_forecasts(forecasts: Forecasts, path: str | Path, id_column: str | None) -> Path | None:
    """The forecast rows to ``path`` (CSV or Parquet by extension), and the series left out,
    with why, to ``<path stem>.skipped.csv`` beside it (returned; None when none was)."""
    path = Path(path)
    if output_format(path) == "Parquet":
        forecasts.frame.to_parquet(path, index=False)
    else:
        forecasts.frame.to_csv(path, index=False)
    if not forecasts.skipped:
        return None
    skipped = path.with_name(f"{path.stem}.skipped.csv")
    pd.DataFrame(
        {id_column or "series": list(forecasts.skipped), "reason": list(forecasts.skipped.values())}
    ).to_csv(skipped, index=False)
    return skipped
