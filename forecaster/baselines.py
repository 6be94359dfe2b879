"""Baselines scored on the very same windows as the model. A model that does not beat these has
learned nothing useful."""

from __future__ import annotations

import numpy as np


def naive(past_target: np.ndarray, horizon: int) -> np.ndarray:
    """Repeat the last observed value: (N, L) -> (N, H)."""
    return np.repeat(past_target[:, -1:], horizon, axis=1)


def seasonal_naive(past_target: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """Repeat the last full season: step h takes the value one (or more) periods earlier.
    Needs a look-back of at least one period."""
    lookback = past_target.shape[1]
    if period > lookback:
        raise ValueError(f"seasonal naive needs lookback >= period ({lookback} < {period})")
    steps = np.arange(horizon)
    positions = lookback - period + (steps % period)  # (H,)
    return past_target[:, positions]


def baseline_forecasts(past_target: np.ndarray, horizon: int, period: int) -> dict[str, np.ndarray]:
    forecasts = {"naive": naive(past_target, horizon)}
    if period <= past_target.shape[1] and period > 1:
        forecasts["seasonal_naive"] = seasonal_naive(past_target, horizon, period)
    return forecasts
