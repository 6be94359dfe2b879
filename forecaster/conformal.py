"""Prediction intervals: split-conformal for point models, coverage checks for any model.

Point models get locally weighted (normalised) split-conformal intervals: the score of a
selection window (the later part of validation, which early stopping never saw) is its absolute
error divided by the window's recent volatility (the mean absolute step-to-step change of the
target over the last seasonal period of the look-back: a day of hourly data, a week of daily
data), and the interval for a new window is the score quantile times that window's volatility,
per horizon step, with the (n+1)/n finite-sample correction.
Scaling by recent volatility keeps coverage when calm and turbulent spells differ between
selection and test (ETTh1's summer validation vs its winter test). Selection windows overlap,
so exchangeability holds only approximately: test coverage is reported beside every interval so a
user sees how close it is."""

from __future__ import annotations

import math

import numpy as np


def interval_quantiles(level: float) -> tuple[float, float]:
    """0.8 -> (0.1, 0.9): the central interval's lower and upper quantile levels."""
    lower = round((1 - level) / 2, 6)
    return lower, round(1 - lower, 6)


def window_volatility(past_target: np.ndarray, span: int, floor: np.ndarray | None = None) -> np.ndarray:
    """(N, L) raw target windows -> (N, 1) mean absolute change over the last ``span`` steps
    (floored, never 0). A recent span tracks calm and turbulent spells better than the whole
    window (chosen on a split of the validation period, not on test). ``floor`` (N,), raw units:
    the least volatility a window is given (``calmest_volatility`` times its series' scale), so
    that a flat stretch (a stuck sensor, rounded readings, weeks of zero demand) gets an interval
    as wide as the calmest window calibration saw, not one 1e-6 wide."""
    changes = np.abs(np.diff(past_target[:, -(span + 1) :], axis=1))  # (N, span)
    volatility = changes.mean(axis=1, keepdims=True)
    if floor is not None:
        volatility = np.maximum(volatility, np.asarray(floor, dtype=np.float64).reshape(-1, 1))
    return np.maximum(volatility, 1e-6 * (np.abs(past_target).mean() + 1.0))


def calmest_volatility(past_target: np.ndarray, span: int, scale: float | np.ndarray) -> float | None:
    """The lowest volatility of (N, L) calibration windows, in units of ``scale``: their series'
    training standard deviation, or (N,) each window's whole look-back volatility for series a
    panel model never saw; None without windows. Below it no calibration window says how large
    the errors get, and as the minimum it changes no calibration score."""
    scales = np.broadcast_to(np.asarray(scale, dtype=np.float64), (len(past_target),))
    usable = scales > 0
    if not usable.any():
        return None
    return float((window_volatility(past_target[usable], span)[:, 0] / scales[usable]).min())


def lookback_volatility(past_target: np.ndarray) -> np.ndarray:
    """(N, L) -> (N,) each window's mean absolute change over its whole look-back: the scale of a
    window whose series has no stored standard deviation. A window whose last seasonal period is
    flat keeps it from the steps before, and unlike the level it does not vanish for a series
    near zero. A window constant over its whole look-back has none (nothing in it says how
    large its errors get)."""
    return window_volatility(past_target, past_target.shape[1] - 1)[:, 0]


def volatility_span(lookback: int, period: int) -> int:
    """The last seasonal period of the look-back, at least 2 steps, at most L - 1."""
    return max(1, min(max(period, 2), lookback - 1))


def conformal_scores(
    actual: np.ndarray, forecast: np.ndarray, past_target: np.ndarray, levels: list[float], span: int
) -> dict[float, np.ndarray]:
    """(N, H) selection-window actuals and point forecasts, (N, L) their input windows -> level -> (H,)
    score quantiles; a new window's half-width is score x its volatility."""
    residuals = np.abs(actual - forecast) / window_volatility(past_target, span)  # (N, H)
    n = len(residuals)
    widths = {}
    for level in levels:
        rank = min(1.0, math.ceil((n + 1) * level) / n)
        widths[level] = np.quantile(residuals, rank, axis=0, method="higher")  # (H,)
    return widths


def coverage(actual: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> dict[str, np.ndarray | float]:
    """Share of actuals inside [lower, upper] and mean width, per horizon step and overall."""
    inside = (actual >= lower) & (actual <= upper)  # (N, H)
    width = upper - lower
    return {
        "coverage": float(inside.mean()),
        "width": float(width.mean()),
        "coverage_by_step": inside.mean(axis=0),
        "width_by_step": width.mean(axis=0),
    }
