"""Is one forecaster's test loss really lower than another's, or inside what the test period can
resolve? A Diebold-Mariano test of the paired loss difference (Diebold & Mariano 1995), with the
variance made robust to how overlapping windows' losses depend on each other.

Every window of a split is a forecast origin, one step after the last: two windows less than H
steps apart forecast some of the same hours, so their losses are far from independent, and a
test period of N windows holds only N + H - 1 hours, (N + H - 1) / H separate horizons (four at
H=720 on ETTh1's test period). The difference d_w (loss of A minus loss of B at origin w) gets a
Newey-West variance (Bartlett weights) over H + a week of lags, and its critical value and
p-value come from the same statistic computed on simulated differences that share targets the
way the windows do (each the sum of H independent per-hour terms, a window's neighbour sharing
all but one), at the same N, H and bandwidth. In 1,000 simulated cases with no difference, at H=192
and 720 and hourly terms independent or autocorrelated at 0.9 or 0.99, it rejected 4.7% to 6.9%
of the time (the most with the most persistent terms); the same statistic against a reference of
independent differences (the "fixed-b" one of Kiefer & Vogelsang 2005, made for dependence short
against N) rejected 8.7% to 17.9%, and 16% to 18% at H=720, where windows share hours over a third
of N. tests/benchmarks/test_paired_loss_test.py checks the size in one setting (H=96, 400 windows,
hourly terms autocorrelated at 0.9).

The interval of the ratio is Fieller's: the ratios R for which the same statistic of A - R B does
not reject, so it counts the uncertainty of B's mean too. Where B's mean is resolved from 0 (in
every ETTh1 record, by a wide margin) it excludes 1 exactly when p <= 5%; otherwise it is
unbounded, and the verdict is the p-value's. The price is width: with a few horizons' worth of
windows the interval is wide, and it says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

SIMULATIONS = 200_000  # null draws per (N, H): a p-value near 5% is within about 0.0005 of its limit
BATCH = 250  # null draws made at once
LEVEL = 0.95
WEEK = 168  # hourly steps


def autocovariances(series: np.ndarray, lags: int) -> np.ndarray:
    """(..., N) -> (..., lags + 1): gamma_k = sum_t (x_t - mean)(x_{t+k} - mean) / N, k = 0..lags,
    through the FFT (zero-padded, so no wrap-around)."""
    centred = series - series.mean(axis=-1, keepdims=True)
    size = 1 << int(2 * centred.shape[-1] - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=-1)
    return np.fft.irfft(spectrum * spectrum.conj(), n=size, axis=-1)[..., : lags + 1] / centred.shape[-1]


def long_run_variance(series: np.ndarray, bandwidth: int) -> np.ndarray:
    """Newey-West: gamma_0 + 2 sum_{k=1..M} (1 - k / (M + 1)) gamma_k; never negative."""
    gamma = autocovariances(series, bandwidth)
    weights = 1.0 - np.arange(1, bandwidth + 1) / (bandwidth + 1.0)
    return gamma[..., 0] + 2.0 * (gamma[..., 1:] * weights).sum(axis=-1)


def statistic(difference: np.ndarray, bandwidth: int) -> np.ndarray:
    """mean(d) / sqrt(long-run variance / N) along the last axis."""
    count = difference.shape[-1]
    return difference.mean(axis=-1) / np.sqrt(long_run_variance(difference, bandwidth) / count)


def overlapping_sums(terms: np.ndarray, horizon: int) -> np.ndarray:
    """(..., N + H - 1) per-hour terms -> (..., N): window w's sum of hours w .. w + H - 1, as
    window w's loss sums its H forecast hours."""
    total = np.cumsum(terms, axis=-1)
    total = np.concatenate([np.zeros((*terms.shape[:-1], 1)), total], axis=-1)
    return total[..., horizon:] - total[..., :-horizon]


@cache
def null_statistics(
    count: int, horizon: int, bandwidth: int, simulations: int = SIMULATIONS, seed: int = 0
) -> np.ndarray:
    """Sorted |statistic| of ``simulations`` null differences: ``count`` windows of ``horizon``
    hours over independent normal per-hour terms (deterministic: ``seed``)."""
    rng = np.random.default_rng(seed)
    batches = [
        np.abs(
            statistic(overlapping_sums(rng.standard_normal((size, count + horizon - 1)), horizon), bandwidth)
        )
        for size in [BATCH] * (simulations // BATCH) + [simulations % BATCH]
        if size
    ]
    return np.sort(np.concatenate(batches))


def bandwidth_of(horizon: int) -> int:
    """Lags of the variance: the H - 1 over which windows share hours, and a week (168 hourly
    steps) for what a model leaves in its errors beyond them."""
    return horizon + WEEK


def critical_value(null: np.ndarray, level: float = LEVEL) -> float:
    """The order statistic c of the sorted ``null`` for which |t| > c exactly when the p-value
    (``p_value``) is at most 1 - level, so that the interval and the p-value never disagree."""
    return float(null[int(np.ceil(level * (len(null) + 1))) - 1])


def p_value(null: np.ndarray, observed: float) -> float:
    """Share of the null at or beyond |t|, counting the observed statistic as one of the draws."""
    at_or_beyond = len(null) - int(np.searchsorted(null, observed, side="left"))
    return (1 + at_or_beyond) / (len(null) + 1)


@dataclass(frozen=True)
class PairedTest:
    """A's mean loss over B's, its interval at LEVEL and the two-sided p-value of "the same"."""

    ratio: float
    low: float
    high: float
    p_value: float
    windows: int
    horizon: int
    bandwidth: int
    simulations: int

    @property
    def verdict(self) -> str:
        return verdict(self.p_value, self.ratio)

    def fields(self) -> dict:
        """What a benchmark record keeps of the test (plain floats, for JSON)."""
        return {
            "ratio": self.ratio,
            "low": float(self.low),
            "high": float(self.high),
            "level": LEVEL,
            "p_value": self.p_value,
            "simulations": self.simulations,
            "windows": self.windows,
            "bandwidth": self.bandwidth,
        }


def verdict(p_value: float, ratio: float, level: float = LEVEL) -> str:
    """What the test says of A's mean loss against B's: "lower" or "higher" where it rejects no
    difference at 1 - level, "not resolved" where it does not. Where B's mean is resolved from 0 the
    interval says the same (it excludes 1 exactly then)."""
    if p_value > 1 - level:
        return "not resolved"
    return "lower" if ratio < 1 else "higher"


def fieller(
    mean_a: float, mean_b: float, variances: tuple[float, float, float], bound: float
) -> tuple[float, float]:
    """The ratios R for which |mean(a - R b)| <= bound x its standard error: the test of "A's mean
    is R times B's" inverted (Fieller), so the spread of B's mean counts too, and R = 1 lies outside
    exactly when the test of no difference rejects. ``variances``: long-run variances of a, of b
    and their covariance, over N (the squared standard errors). Where B's own mean is not resolved
    from 0 (mean_b^2 <= bound^2 var_b) the set is unbounded (the whole line, or two rays): returned
    as (-inf, inf), and ``verdict`` reads the p-value."""
    var_a, var_b, cov_ab = variances
    k = bound**2
    quadratic = mean_b**2 - k * var_b  # (mean_a - R mean_b)^2 - k var(a - R b) <= 0, in R
    linear = mean_a * mean_b - k * cov_ab
    constant = mean_a**2 - k * var_a
    if quadratic <= 0:
        return -np.inf, np.inf
    root = np.sqrt(max(linear**2 - quadratic * constant, 0.0))
    return float((linear - root) / quadratic), float((linear + root) / quadratic)


def observed_statistic(mean: float, spread: float) -> float:
    """|mean| / standard error; where A - B is the same in every window (no spread), no difference
    at all (0) or one beyond any doubt (infinite)."""
    if spread > 0:
        return abs(mean) / spread
    return 0.0 if mean == 0 else np.inf


def paired_test(
    loss_a: np.ndarray, loss_b: np.ndarray, horizon: int, simulations: int = SIMULATIONS
) -> PairedTest:
    """Losses (N,) of A and B on the same N windows of ``horizon`` steps, in origin order -> A's
    mean over B's, its interval (Fieller's, from the same statistic and critical value) and the
    p-value of no difference (a zero mean of A - B)."""
    if loss_a.shape != loss_b.shape or loss_a.ndim != 1:
        raise ValueError(
            f"paired losses must be two (N,) arrays of one shape, not {loss_a.shape} and {loss_b.shape}"
        )
    if not (np.all(np.isfinite(loss_a)) and np.all(np.isfinite(loss_b))):
        raise ValueError("paired losses must be finite: a NaN or infinite loss has no mean to test")
    count, bandwidth = loss_a.shape[0], bandwidth_of(horizon)
    if bandwidth >= count:
        raise ValueError(
            f"{count} windows are too few for a horizon of {horizon}: the variance reads {bandwidth} lags"
        )
    difference = loss_a - loss_b
    mean, spread = float(difference.mean()), float(np.sqrt(long_run_variance(difference, bandwidth) / count))
    observed = observed_statistic(mean, spread)
    null = null_statistics(count, horizon, bandwidth, simulations)
    var_a, var_b = (float(long_run_variance(loss, bandwidth)) / count for loss in (loss_a, loss_b))
    cov_ab = (var_a + var_b - spread**2) / 2  # var(a - b) = var a + var b - 2 cov
    low, high = fieller(
        float(loss_a.mean()), float(loss_b.mean()), (var_a, var_b, cov_ab), critical_value(null)
    )
    return PairedTest(
        ratio=float(loss_a.mean()) / float(loss_b.mean()),
        low=low,
        high=high,
        p_value=p_value(null, observed),
        windows=count,
        horizon=horizon,
        bandwidth=bandwidth,
        simulations=simulations,
    )
