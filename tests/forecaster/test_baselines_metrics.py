import numpy as np
import pytest

from forecaster.baselines import naive, seasonal_naive
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
