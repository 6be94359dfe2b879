"""The alignment metrics' definitions (forecaster/alignment.py), on maps made by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from forecaster.alignment import (
    alignment_metrics,
    lags,
    mean_weight_by_lag,
    normalised_entropy,
    row_distance,
    seasonal_share,
)


def uniform(windows: int, horizon: int, lookback: int) -> np.ndarray:
    return np.full((windows, horizon, lookback), 1 / lookback)


def on_lag(lag: int, windows: int, horizon: int, lookback: int) -> np.ndarray:
    """Every row's whole weight on the look-back step ``lag`` steps before its forecast step."""
    weights = np.zeros((windows, horizon, lookback))
    for t in range(horizon):
        weights[:, t, t + lookback - lag] = 1.0
    return weights


def test_uniform_rows_have_entropy_one_no_row_distance_and_the_uniform_seasonal_share():
    metrics = alignment_metrics(uniform(3, 24, 96), period=24)
    assert metrics.entropy == pytest.approx(1.0)
    assert metrics.row_distance == pytest.approx(0.0)
    # at L=96 the lags k*24 among 1..96+t are 24, 48, 72, 96 for every t: 4 of 96
    assert metrics.seasonal_share_uniform == pytest.approx(4 / 96)
    assert metrics.seasonal_share == pytest.approx(metrics.seasonal_share_uniform)
    assert (metrics.period, metrics.windows) == (24, 3)


def test_rows_on_yesterdays_hour_have_entropy_zero_share_one_and_differ_completely():
    metrics = alignment_metrics(on_lag(24, 2, 24, 96), period=24)
    assert metrics.entropy == pytest.approx(0.0)
    assert metrics.seasonal_share == pytest.approx(1.0)
    assert metrics.row_distance == pytest.approx(1.0)  # each row on its own step: no shared weight
    assert seasonal_share(on_lag(25, 2, 24, 96), 24)[0] == pytest.approx(0.0)


def test_one_row_repeated_has_no_row_distance_however_peaked():
    row = np.zeros(10)
    row[3] = 1.0
    weights = np.broadcast_to(row, (2, 6, 10))
    assert row_distance(weights) == pytest.approx(0.0)
    assert normalised_entropy(weights) == pytest.approx(0.0)


def test_the_row_distance_is_half_the_l1_distance_averaged_over_pairs():
    rows = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0]])
    # pairs: (0, 1) 0.5, (0, 2) 1.0, (1, 2) 1.0
    assert row_distance(rows[None]) == pytest.approx((0.5 + 1.0 + 1.0) / 3)
    weights = np.random.default_rng(0).dirichlet(np.ones(7), size=(3, 5))  # (3, 5, 7)
    brute = np.mean(
        [
            np.mean([np.abs(w[a] - w[b]).sum() / 2 for a, b in itertools.combinations(range(5), 2)])
            for w in weights
        ]
    )
    assert row_distance(weights) == pytest.approx(brute)


def test_entropy_of_a_row_split_over_two_steps():
    weights = np.zeros((1, 1, 8))
    weights[0, 0, :2] = 0.5
    assert normalised_entropy(weights) == pytest.approx(np.log(2) / np.log(8))


def test_a_single_forecast_step_has_no_row_distance_and_a_single_step_no_entropy():
    assert np.isnan(row_distance(uniform(2, 1, 5)))
    assert np.isnan(normalised_entropy(uniform(2, 3, 1)))


def test_lags_and_the_mean_weight_by_lag():
    assert lags(2, 3).tolist() == [[3, 2, 1], [4, 3, 2]]  # t + L - i
    weights = np.array([[[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]])  # (1, H=2, L=3)
    # lag 1: (t=0, i=2); lag 2: (0, 1) and (1, 2); lag 3: (0, 0) and (1, 1); lag 4: (1, 0)
    np.testing.assert_allclose(mean_weight_by_lag(weights), [0.5, 0.2, 0.25, 0.6])
    np.testing.assert_allclose(mean_weight_by_lag(uniform(2, 24, 96)), 1 / 96)
