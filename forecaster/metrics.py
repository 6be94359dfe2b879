"""Forecast errors in original units over windows: arrays are (N, H)."""

from __future__ import annotations

import numpy as np


def mae(actual: np.ndarray, forecast: np.ndarray) -> float:
    return float(np.mean(np.abs(actual - forecast)))


def rmse(actual: np.ndarray, forecast: np.ndarray) -> float:
    return float(np.sqrt(np.mean((actual - forecast) ** 2)))


def smape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Symmetric MAPE in percent; a step where both are 0 counts as 0 error."""
    denominator = np.abs(actual) + np.abs(forecast)
    ratio = np.divide(
        2 * np.abs(actual - forecast),
        denominator,
        out=np.zeros_like(denominator),
        where=denominator > 0,
    )
    return float(100 * np.mean(ratio))


def seasonal_naive_scale(train_target: np.ndarray, period: int) -> float:
    """In-sample MAE of the seasonal-naive forecast on the training series (MASE's denominator)."""
    period = min(period, len(train_target) - 1)
    return float(np.mean(np.abs(train_target[period:] - train_target[:-period])))


def window_scales(past: np.ndarray, period: int) -> np.ndarray:
    """seasonal_naive_scale of each window's own look-back, all at once: (n, L) -> (n,). MASE's
    scale for a series the model never trained on (it has no training rows to take it from)."""
    lag = min(period, past.shape[1] - 1)
    return np.mean(np.abs(past[:, lag:] - past[:, :-lag]), axis=1)


def mase(actual: np.ndarray, forecast: np.ndarray, scale: float) -> float:
    return mae(actual, forecast) / scale if scale > 0 else float("nan")


def directional_accuracy(actual: np.ndarray, forecast: np.ndarray, last: np.ndarray) -> float:
    """Share of steps where the forecast moves the same way from the last observed value as the
    actual series does (what matters for a price series); flat actual moves are skipped."""
    actual_move = np.sign(actual - last[:, None])
    forecast_move = np.sign(forecast - last[:, None])
    moved = actual_move != 0
    return float(np.mean(actual_move[moved] == forecast_move[moved])) if moved.any() else 0.0


def per_step_mae(actual: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    return np.mean(np.abs(actual - forecast), axis=0)  # (H,)


def all_metrics(
    actual: np.ndarray, forecast: np.ndarray, last: np.ndarray, mase_scale: float
) -> dict[str, float]:
    return {
        "mae": mae(actual, forecast),
        "rmse": rmse(actual, forecast),
        "smape": smape(actual, forecast),
        "mase": mase(actual, forecast, mase_scale),
        "directional_accuracy": directional_accuracy(actual, forecast, last),
    }
