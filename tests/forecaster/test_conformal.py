import numpy as np
import pytest

from forecaster.conformal import (
    calmest_volatility,
    conformal_scores,
    coverage,
    interval_quantiles,
    lookback_volatility,
    volatility_span,
    window_volatility,
)


def synthetic(n: int, seed: int):
    """Windows whose volatility varies 10x, errors proportional to it: exchangeable by design."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.1, 1.0, size=(n, 1))
    past = np.cumsum(rng.normal(0, 1, size=(n, 30)) * scale, axis=1)
    forecast = np.repeat(past[:, -1:], 5, axis=1)
    actual = forecast + rng.normal(0, 1, size=(n, 5)) * scale * np.arange(1, 6)
    return past, forecast, actual


def test_normalised_split_conformal_covers_the_requested_share():
    past, forecast, actual = synthetic(4000, seed=0)
    scores = conformal_scores(actual, forecast, past, [0.8, 0.95], span=10)
    test_past, test_forecast, test_actual = synthetic(4000, seed=1)
    volatility = window_volatility(test_past, span=10)
    for level, expected in [(0.8, 0.8), (0.95, 0.95)]:
        width = scores[level] * volatility
        result = coverage(test_actual, test_forecast - width, test_forecast + width)
        assert result["coverage"] == pytest.approx(expected, abs=0.02)
        assert result["coverage_by_step"].shape == (5,)
    assert (np.diff(scores[0.8]) > 0).all()  # later steps are less certain: wider


def test_interval_quantiles():
    assert interval_quantiles(0.8) == (0.1, 0.9)
    assert interval_quantiles(0.95) == (0.025, 0.975)


def test_volatility_span_is_one_season_within_the_window():
    assert volatility_span(lookback=96, period=24) == 24
    assert volatility_span(lookback=14, period=24) == 13
    assert volatility_span(lookback=28, period=1) == 2


def test_a_flat_window_gets_the_calmest_calibration_windows_volatility_not_zero():
    past, _, _ = synthetic(200, seed=2)
    calmest = calmest_volatility(past, span=10, scale=2.0)
    assert calmest == pytest.approx(window_volatility(past, span=10).min() / 2.0)
    flat = np.full((1, 30), 14.0)
    assert window_volatility(flat, span=10)[0, 0] < 1e-4  # no floor: near-certainty
    floored = window_volatility(flat, span=10, floor=np.array([calmest * 2.0]))
    assert floored[0, 0] == pytest.approx(window_volatility(past, span=10).min())
    # as the minimum it changes no calibration window's volatility, so no calibration score
    np.testing.assert_array_equal(
        window_volatility(past, span=10, floor=np.full(200, calmest * 2.0)), window_volatility(past, span=10)
    )
    assert calmest_volatility(past[:0], span=10, scale=2.0) is None


def test_a_window_of_an_unseen_series_is_scaled_by_its_whole_look_back():
    past = np.array([[0.0, 2.0, 0.0, 0.0, 0.0], [-1.0, 1.0, -1.0, 1.0, -1.0], [3.0, 3.0, 3.0, 3.0, 3.0]])
    whole = lookback_volatility(past)
    # the first is flat over its last 2 steps but not before; near zero, the level would be ~0
    np.testing.assert_allclose(whole[:2], [1.0, 2.0])
    assert whole[2] < 1e-5  # constant throughout: nothing in it gives a scale
    recent = window_volatility(past[:2], span=2)[:, 0]  # its floor depends on the windows given
    assert calmest_volatility(past[:2], span=2, scale=whole[:2]) == pytest.approx(min(recent / whole[:2]))
