"""`forecast predict`: the next H steps after the end of a series, offline: the forecast and,
where the model has prediction intervals, one column per quantile level (e.g. ``temp_q0.1`` and
``temp_q0.9`` bound the 80% interval), all rounded to 6 significant digits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from forecaster.data.loading import LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.data.source import load_from_config
from forecaster.errors import DataError
from forecaster.predictor import Predictor
from pipelines.evaluate import data_config_for
from pipelines.registry import load_predictor

SIGNIFICANT_DIGITS = 6


def forecast_next(model_uri: str, overrides: dict[str, Any]) -> pd.DataFrame:
    """One forecast per series: a panel's come one after the other, with its id column first."""
    predictor = load_predictor(model_uri)
    if predictor.future_covariates:
        raise DataError(
            f"this model needs the future covariates {predictor.future_covariates} for the "
            f"{predictor.horizon} steps after the data ends, which a history file does not hold: "
            "send them to the service (series[i].future) or the pyfunc (input 'future')"
        )
    data = data_config_for(predictor, overrides)
    loaded = load_from_config(data)
    if not isinstance(loaded, LoadedPanel):
        return next_steps(predictor, loaded)
    frames = [
        next_steps(predictor, series).assign(**{loaded.id_column: key})
        for key, series in loaded.members.items()
    ]
    frame = pd.concat(frames, ignore_index=True)
    return frame[[loaded.id_column, *frame.columns[:-1]]]


def next_steps(predictor: Predictor, series: LoadedSeries) -> pd.DataFrame:
    frame = series.frame[predictor.features]
    if len(frame) < predictor.lookback:
        raise DataError(f"{series.label}: {len(frame)} rows, the model needs the last {predictor.lookback}")
    recent = frame.iloc[-predictor.lookback :]
    ids = None if series.series_id is None else [series.series_id]
    prediction = predictor.predict(recent.to_numpy()[None], recent.index.values[None], series_ids=ids)
    columns = {
        frame.index.name or "time": prediction.future_times[0],
        f"{series.target}_forecast": significant(prediction.mean[0]),
    }
    for level, values in sorted(prediction.quantiles.items()):  # the model's interval bounds
        columns[f"{series.target}_q{level:g}"] = significant(values[0])
    return pd.DataFrame(columns)


def significant(values: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Round to ``digits`` significant digits: the network computes in float32 (about 7
    significant digits), so anything printed beyond 6 is noise, not precision; significant
    rather than fixed decimals because targets range from 0.001 to 1e6."""
    return np.array([float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=np.float64)])
