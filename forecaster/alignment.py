"""How an attention model aligns: three numbers about its weights, so "the map says nothing" and
"it looks at the same hour yesterday" can be told apart without reading heat maps.

All take weights (N, H, L): N windows, forecast step t (0-based) x look-back step i (0-based),
every row summing to 1. The lag of look-back step i for forecast step t is t + L - i: the last
look-back step is lag 1 for the first forecast step.

* ``normalised_entropy``: the mean entropy of the rows divided by log L: 1 for uniform rows (the
  weights average the look-back), 0 for rows that put all their weight on one step.
* ``row_distance``: the mean total-variation distance between the rows of two forecast steps of
  the same window, over all pairs: 0 when every step has the same row (what a decoder with one
  query per segment, or one that ignores its position, gives), 1 when the rows share no weight.
* ``seasonal_share``: the mean share of a row's weight on lags that are whole multiples of the
  seasonal period (24 for hourly data): the same hour on earlier days. Beside it, the share uniform
  rows would give, the number of such lags among the L averaged over the steps (4/96 at L=96).

Reported only: they describe a trained model and never decide anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class AlignmentMetrics:
    entropy: float  # mean normalised row entropy: 1 = uniform
    row_distance: float  # mean total-variation distance between rows of one window: 0 = same rows
    seasonal_share: float  # mean weight on lags that are multiples of ``period``
    seasonal_share_uniform: float  # what uniform rows would put there
    period: int
    windows: int  # N: the windows they were measured on

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def title(self) -> str:
        """One line for a plot's title."""
        return (
            f"entropy {self.entropy:.2f} (1 = uniform), row distance {self.row_distance:.2f} "
            f"(0 = same rows), weight on lags k*{self.period}: {self.seasonal_share:.1%} "
            f"(uniform {self.seasonal_share_uniform:.1%}), {self.windows} windows"
        )


def normalised_entropy(weights: np.ndarray) -> float:
    """Mean over windows and rows of -sum p log p / log L (nan for L = 1, where every row is 1)."""
    lookback = weights.shape[2]
    if lookback < 2:
        return float("nan")
    p = np.asarray(weights, dtype=np.float64)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)  # 0 log 0 = 0
    return float(terms.sum(axis=2).mean() / np.log(lookback))


def row_distance(weights: np.ndarray) -> float:
    """Mean over windows of the mean over row pairs t < t' of 1/2 sum_i |w[t, i] - w[t', i]|
    (nan for H = 1: no pair).

    Exact in O(L H log H) per window: for one column's values sorted x_(1) <= ... <= x_(H), the
    sum over pairs of |a - b| is sum_k x_(k) (2k - H - 1)."""
    horizon = weights.shape[1]
    if horizon < 2:
        return float("nan")
    ordered = np.sort(np.asarray(weights, dtype=np.float64), axis=1)  # (N, H, L), each column sorted
    coefficients = 2 * np.arange(1, horizon + 1) - horizon - 1  # (H,)
    pair_sums = np.einsum("nhl,h->n", ordered, coefficients)  # (N,): sum over pairs and columns
    pairs = horizon * (horizon - 1) / 2
    return float((pair_sums / 2 / pairs).mean())


def lags(horizon: int, lookback: int) -> np.ndarray:
    """(H, L): the lag t + L - i of look-back step i for forecast step t."""
    return np.arange(horizon)[:, None] + lookback - np.arange(lookback)[None, :]


def seasonal_share(weights: np.ndarray, period: int) -> tuple[float, float]:
    """(mean weight on lags that are multiples of ``period``, the same for uniform rows)."""
    _, horizon, lookback = weights.shape
    seasonal = lags(horizon, lookback) % period == 0  # (H, L)
    share = np.asarray(weights, dtype=np.float64)[:, seasonal].sum(axis=-1) / horizon  # (N,)
    return float(share.mean()), float(seasonal.sum() / (horizon * lookback))


def mean_weight_by_lag(weights: np.ndarray) -> np.ndarray:
    """(H + L - 1,): at lag 1 .. H + L - 1, the mean weight of the (window, t, i) cells with that
    lag (the plot's profile; uniform rows give 1/L at every lag)."""
    _, horizon, lookback = weights.shape
    index = (lags(horizon, lookback) - 1).ravel()  # (H*L,): lag 1 at index 0
    total = np.bincount(index, weights=np.asarray(weights, dtype=np.float64).mean(axis=0).ravel())
    cells = np.bincount(index)
    return total / cells


def alignment_metrics(weights: np.ndarray, period: int) -> AlignmentMetrics:
    share, uniform = seasonal_share(weights, period)
    return AlignmentMetrics(
        entropy=normalised_entropy(weights),
        row_distance=row_distance(weights),
        seasonal_share=share,
        seasonal_share_uniform=uniform,
        period=period,
        windows=len(weights),
    )
