"""Baselines scored on the very same windows as the model. A model that does not beat these has
learned nothing useful."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class LinearBaseline:
    """NLinear (Zeng et al., "Are Transformers Effective for Time Series Forecasting?", AAAI 2023):
    each window minus its last value, one linear map from the look-back to the horizon, the last
    value added back. The paper trains it by gradient descent on the MSE; the same minimiser has a
    closed form, fitted here by least squares on the training windows in about a second, so it is
    a fitted baseline with nothing to tune and no seed.

    It is what the papers' figures for a look-back of 336 put first to clear, which a recurrent
    network has to be measured against on the very same windows (benchmarks/ett_linear.py)."""

    weights: np.ndarray  # (L - 1, H): the last value's own column is 0 after the shift, so left out
    bias: np.ndarray  # (H,)

    @classmethod
    def fit(cls, past_target: np.ndarray, target: np.ndarray) -> LinearBaseline:
        """Least squares on training windows: past (N, L) and what followed each, (N, H)."""
        design, future = nlinear_design(past_target), target - past_target[:, -1:]
        if len(design) < past_target.shape[1]:  # L weights with the bias: fewer rows leave them free
            raise ValueError(
                f"a linear baseline over a look-back of {past_target.shape[1]} needs at least "
                f"{past_target.shape[1]} training windows, got {len(design)}"
            )
        solution, *_ = np.linalg.lstsq(design, future, rcond=None)  # (L, H)
        return cls(weights=solution[:-1], bias=solution[-1])

    def forecast(self, past_target: np.ndarray) -> np.ndarray:
        """(N, L) -> (N, H)."""
        return relative_to_last(past_target) @ self.weights + self.bias + past_target[:, -1:]


def relative_to_last(past_target: np.ndarray) -> np.ndarray:
    """(N, L) -> (N, L - 1): every step but the last, minus the last."""
    return past_target[:, :-1] - past_target[:, -1:]


def nlinear_design(past_target: np.ndarray) -> np.ndarray:
    """(N, L) -> (N, L): NLinear's inputs, every step but the last minus the last, and a column of
    ones for the bias (last): the design matrix of a linear map from the look-back."""
    return np.hstack([relative_to_last(past_target), np.ones((len(past_target), 1))])
