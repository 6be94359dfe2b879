import numpy as np
import pytest

from forecaster.baselines import LinearBaseline, naive, seasonal_naive
from forecaster.data.frequency import infer_frequency, seasonal_period
from forecaster.metrics import directional_accuracy, mase, seasonal_naive_scale, smape


def test_naive_and_seasonal_naive_on_hand_values():
    past = np.array([[1.0, 2, 3, 4, 5, 6]])
    assert naive(past, 3).tolist() == [[6, 6, 6]]
    # period 3: steps repeat the last full season 4, 5, 6, then again
    assert seasonal_naive(past, 4, period=3).tolist() == [[4, 5, 6, 4]]
    with pytest.raises(ValueError, match="lookback >= period"):
        seasonal_naive(past, 2, period=7)


def test_metrics_on_hand_values():
    actual = np.array([[2.0, 4.0]])
    forecast = np.array([[1.0, 4.0]])
    assert smape(actual, forecast) == pytest.approx(100 * (2 * 1 / 3) / 2)
    scale = seasonal_naive_scale(np.array([1.0, 2, 3, 4]), period=1)
    assert scale == 1.0
    assert mase(actual, forecast, scale) == 0.5
    last = np.array([3.0])
    # actual goes down then up from 3; forecast goes down then up: both right
    assert directional_accuracy(actual, forecast, last) == 1.0


@pytest.mark.parametrize(("freq", "period"), [("h", 24), ("30min", 48), ("D", 7), ("B", 5), ("MS", 12)])
def test_seasonal_period_follows_frequency(freq, period):
    assert seasonal_period(freq) == period


def test_frequency_inference():
    import pandas as pd

    assert infer_frequency(pd.date_range("2024-01-01", periods=30, freq="D")) == "D"
    assert infer_frequency(pd.bdate_range("2024-01-01", periods=30)) == "B"
    assert infer_frequency(pd.date_range("2024-01-01", periods=30, freq="30min")) == "30min"


def test_linear_baseline_recovers_a_linear_rule_and_adds_the_last_value_back():
    # each future step is the last value plus a fixed mix of the two steps before it and a drift:
    # exactly NLinear's form, so least squares finds it to rounding
    rng = np.random.default_rng(0)
    past = rng.normal(size=(200, 4)).cumsum(axis=1) + 50.0  # (N, L=4), far from 0
    shifted = past[:, :-1] - past[:, -1:]  # (N, 3)
    rule = np.array([[0.0, 0.0], [0.5, -0.2], [0.3, 0.7]])  # (L-1, H=2)
    future = shifted @ rule + np.array([0.1, -0.3]) + past[:, -1:]
    fitted = LinearBaseline.fit(past, future)
    np.testing.assert_allclose(fitted.weights, rule, atol=1e-9)
    np.testing.assert_allclose(fitted.bias, [0.1, -0.3], atol=1e-9)
    fresh = rng.normal(size=(5, 4)).cumsum(axis=1) - 20.0  # another level: only differences matter
    np.testing.assert_allclose(
        fitted.forecast(fresh),
        (fresh[:, :-1] - fresh[:, -1:]) @ rule + [0.1, -0.3] + fresh[:, -1:],
        atol=1e-9,
    )


def test_linear_baseline_refuses_fewer_windows_than_weights():
    with pytest.raises(ValueError, match="needs at least 4 training windows, got 3"):
        LinearBaseline.fit(np.ones((3, 4)), np.ones((3, 2)))
    LinearBaseline.fit(np.arange(16.0).reshape(4, 4) ** 2, np.ones((4, 2)))  # as many as weights: fitted
