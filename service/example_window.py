"""The example window: one valid request's worth of input for the served model, built here once
for both of its uses, the warm-up forward pass when a model loads (service/model_store.py) and the
example request the OpenAPI document shows in /docs (service/main.py). Built twice, the two had
drifted (a flat window for one, a swinging one for the other; different timestamp units)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forecaster.predictor import Predictor

START = np.datetime64("2024-01-01T00:00", "s")  # where a calendar model's example timestamps begin


@dataclass
class ExampleWindow:
    values: np.ndarray  # (L, F)
    timestamps: np.ndarray | None  # (L,) datetime64[s], for calendar models
    future: np.ndarray | None  # (H, C): each future covariate, for models that take them


def example_window(predictor: Predictor, plausible: bool = True) -> ExampleWindow:
    """Each feature at its training mean, the target swinging one standard deviation over the
    window (with ``plausible`` off: zeros and a unit sine, which tell nothing of the training
    data); evenly spaced timestamps for calendar models; future covariates at their means."""
    steps = np.arange(predictor.lookback)
    features = len(predictor.features)
    mean = predictor.scaler.mean if plausible else np.zeros(features)
    swing = predictor.scaler.std[0] if plausible else 1.0
    values = np.tile(np.asarray(mean, dtype=np.float64), (predictor.lookback, 1))
    values[:, 0] += swing * np.sin(2 * np.pi * steps / max(predictor.lookback, 2))
    timestamps = None
    if predictor.uses_calendar:
        step = predictor.future_times(np.array([START]))[0, 0] - START
        timestamps = START + step * steps
    future = None
    if predictor.future_covariates:
        covariates = len(predictor.future_covariates)
        means = predictor.future_scaler.mean if plausible else np.zeros(covariates)
        future = np.tile(np.asarray(means, dtype=np.float64), (predictor.horizon, 1))
    return ExampleWindow(values, timestamps, future)


def example_request(predictor: Predictor, plausible: bool) -> dict[str, Any]:
    """The example window as a PredictRequest document, numbers rounded for reading."""
    window = example_window(predictor, plausible)
    rows = np.round(window.values, 3)
    series: dict[str, Any] = {"values": rows[:, 0].tolist() if rows.shape[1] == 1 else rows.tolist()}
    if window.timestamps is not None:
        series["timestamps"] = [str(t) for t in np.datetime_as_string(window.timestamps, "s")]
    if window.future is not None:
        series["future"] = {
            name: [round(float(v), 3) for v in window.future[:, j]]
            for j, name in enumerate(predictor.future_covariates)
        }
    return {"series": [series]}
