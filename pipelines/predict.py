"""`forecast predict`: the next H steps after the end of a series, or of every series of a panel,
offline: the forecast and, where the model has prediction intervals, one column per quantile
level (e.g. ``temp_q0.1`` and ``temp_q0.9`` bound the 80% interval), all rounded to 6 significant
digits, and the model version that made them.

A panel (``--id-column``) is forecast in batches: the last L rows of every series that loads go
through the network a few thousand windows at a time. A series that cannot be forecast (too
short, a gap, another frequency, a value that is not a number) is named with the reason and left
out; the others are forecast. The same job runs on Apache Spark with ``--engine spark``
(pipelines/spark_predict.py), one series per group."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.data.loading import LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError, DataError
from forecaster.predictor import Predictor
from pipelines.evaluate import data_config_for, resolve_model_uri
from pipelines.registry import load_predictor

SIGNIFICANT_DIGITS = 6
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
    """The next H steps of one series, or of every series of a panel."""
    started = time.perf_counter()
    predictor = check_predictable(load_predictor(model_uri), model_uri)
    version = model_version(model_uri)
    loaded = load_from_config(data_config_for(predictor, overrides), skip_bad_series=True)
    if not isinstance(loaded, LoadedPanel):
        frame = next_steps(predictor, loaded).assign(model_version=version)
        return Forecasts(frame, seconds=time.perf_counter() - started)
    frame, too_short = panel_forecasts(predictor, loaded, version)
    skipped = dict(sorted({**loaded.skipped, **too_short}.items()))
    return Forecasts(frame, skipped, len(loaded.members) - len(too_short), time.perf_counter() - started)


def check_predictable(predictor: Predictor, model_uri: str) -> Predictor:
    if predictor.future_covariates:
        raise DataError(
            f"{model_uri} needs the future covariates {predictor.future_covariates} for the "
            f"{predictor.horizon} steps after the data ends, which a history file does not hold: "
            "send them to the service (series[i].future) or the pyfunc (input 'future')"
        )
    return predictor


def model_version(model_uri: str) -> str:
    """What the forecasts are stamped with: the registered version (``name/3``) an alias or
    version URI resolves to, else the URI itself (a run's model)."""
    resolved = resolve_model_uri(model_uri)
    return model_uri if resolved is None else f"{resolved.name}/{resolved.version}"


def too_short(predictor: Predictor, series: LoadedSeries) -> str | None:
    rows = len(series.frame)
    if rows < predictor.lookback:
        return f"{series.label}: {rows} rows, the model needs the last {predictor.lookback}"
    return None


def next_steps(predictor: Predictor, series: LoadedSeries) -> pd.DataFrame:
    """One series' forecast, a row per step."""
    problem = too_short(predictor, series)
    if problem:
        raise DataError(problem)
    recent = series.frame[predictor.features].iloc[-predictor.lookback :]
    ids = None if series.series_id is None else [series.series_id]
    prediction = predictor.predict(recent.to_numpy()[None], recent.index.values[None], series_ids=ids)
    return steps_frame(series, prediction.future_times[0], prediction.mean[0], {
        q: values[0] for q, values in prediction.quantiles.items()})  # fmt: skip


def panel_forecasts(
    predictor: Predictor, panel: LoadedPanel, version: str
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every member long enough, forecast in one call (the predictor batches it): one row per
    series and step, the id column first."""
    short = {key: reason for key, series in panel.members.items() if (reason := too_short(predictor, series))}
    members = [series for key, series in panel.members.items() if key not in short]
    if not members:
        first = next(iter(short.values()))
        raise DataError(f"no series of the panel is long enough to forecast ({first})")
    lookback, columns = predictor.lookback, predictor.features
    values = np.stack([m.frame[columns].to_numpy()[-lookback:] for m in members])  # (N, L, F)
    times = np.stack([m.frame.index.values[-lookback:] for m in members])  # (N, L)
    ids = [m.series_id for m in members]
    prediction = predictor.predict(values, times, series_ids=ids)
    frames = [
        steps_frame(m, prediction.future_times[i], prediction.mean[i],
                    {q: bound[i] for q, bound in prediction.quantiles.items()})
        for i, m in enumerate(members)
    ]  # fmt: skip
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, panel.id_column, np.repeat(ids, predictor.horizon))
    return frame.assign(model_version=version), short


def steps_frame(
    series: LoadedSeries, times: np.ndarray, mean: np.ndarray, quantiles: dict[float, np.ndarray]
) -> pd.DataFrame:
    columns = {series.frame.index.name or "time": times, f"{series.target}_forecast": significant(mean)}
    for level, values in sorted(quantiles.items()):  # the model's interval bounds
        columns[f"{series.target}_q{level:g}"] = significant(values)
    return pd.DataFrame(columns)


def significant(values: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Round to ``digits`` significant digits: the network computes in float32 (about 7
    significant digits), so anything printed beyond 6 is noise, not precision; significant
    rather than fixed decimals because targets range from 0.001 to 1e6."""
    return np.array([float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=np.float64)])


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
