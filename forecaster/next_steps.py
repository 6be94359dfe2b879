"""The next H steps after the end of a series, or of every series of a panel: one row per series
and step, the forecast and, where the model has prediction intervals, one column per quantile
level (``temp_q0.1`` and ``temp_q0.9`` bound the 80% interval), rounded to 6 significant digits.

What both `forecast predict` (pipelines/predict.py, which adds the model version) and
``Forecaster.predict`` return, so the two give the same figures. A panel's members go through the
network together (the predictor batches them); a member too short to forecast is named with why
and left out, the others forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.loading import LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.errors import DataError
from forecaster.predictor import Prediction, Predictor

SIGNIFICANT_DIGITS = 6


def check_predictable(predictor: Predictor, model: str) -> Predictor:
    """A model that needs future covariates cannot forecast from a history alone (``model``
    names it in the error)."""
    if predictor.future_covariates:
        raise DataError(
            f"{model} needs the future covariates {predictor.future_covariates} for the "
            f"{predictor.horizon} steps after the data ends, which a history file does not hold: "
            "send them to the service (series[i].future) or the pyfunc (input 'future')"
        )
    return predictor


def too_short(predictor: Predictor, series: LoadedSeries) -> str | None:
    rows = len(series.frame)
    if rows < predictor.lookback:
        return f"{series.label}: {rows} rows, the model needs the last {predictor.lookback}"
    return None


def forecast_loaded(
    predictor: Predictor, loaded: LoadedSeries | LoadedPanel
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of ``loaded``'s next steps, and the series left out with why (a panel's)."""
    if not isinstance(loaded, LoadedPanel):
        return next_steps(predictor, loaded), {}
    frame, short = panel_forecasts(predictor, loaded)
    return frame, dict(sorted({**loaded.skipped, **short}.items()))


def next_steps(predictor: Predictor, series: LoadedSeries) -> pd.DataFrame:
    """One series' forecast, a row per step."""
    prediction = forecast_of(predictor, series)
    assert prediction.future_times is not None  # timestamps were given
    quantiles = {q: values[0] for q, values in prediction.quantiles.items()}
    return steps_frame(series, prediction.future_times[0], prediction.mean[0], quantiles)


def forecast_of(predictor: Predictor, series: LoadedSeries, return_attention: bool = False) -> Prediction:
    """The network's forecast after the last L rows of one series (DataError if it has fewer)."""
    problem = too_short(predictor, series)
    if problem:
        raise DataError(problem)
    recent = series.frame[series.columns].iloc[-predictor.lookback :]  # the model's, the target as named here
    ids = None if series.series_id is None else [series.series_id]
    return predictor.predict(
        recent.to_numpy()[None], recent.index.values[None], return_attention=return_attention, series_ids=ids
    )


def panel_forecasts(predictor: Predictor, panel: LoadedPanel) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every member long enough, forecast in one call: one row per series and step, the id
    column first; and the members too short, with why."""
    short = {key: reason for key, series in panel.members.items() if (reason := too_short(predictor, series))}
    members = [series for key, series in panel.members.items() if key not in short]
    if not members:
        first = next(iter(short.values()))
        raise DataError(f"no series of the panel is long enough to forecast ({first})")
    lookback = predictor.lookback
    values = np.stack([m.frame[m.columns].to_numpy()[-lookback:] for m in members])  # (N, L, F)
    times = np.stack([m.frame.index.values[-lookback:] for m in members])  # (N, L)
    ids = [m.series_id for m in members]
    prediction = predictor.predict(values, times, series_ids=ids)
    assert prediction.future_times is not None
    frames = [
        steps_frame(m, prediction.future_times[i], prediction.mean[i],
                    {q: bound[i] for q, bound in prediction.quantiles.items()})
        for i, m in enumerate(members)
    ]  # fmt: skip
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, panel.id_column, np.repeat(ids, predictor.horizon))
    return frame, short


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
