"""Window counts, alignment, calendar features and the split/scaler contract."""

import numpy as np
import pandas as pd
import pytest

from forecaster.config import ForecastConfig
from forecaster.data.calendar import calendar_features
from forecaster.data.datamodule import ForecastDataModule, prepare_series
from forecaster.data.loading import LoadedSeries
from forecaster.data.windows import SeriesWindows, window_starts
from forecaster.errors import ConfigError


def hand_made(n: int = 20, freq: str = "h") -> LoadedSeries:
    index = pd.date_range("2024-01-01", periods=n, freq=freq, name="t")
    frame = pd.DataFrame({"y": np.arange(n, dtype=float), "x": 100 + np.arange(n, dtype=float)}, index=index)
    return LoadedSeries(frame, "y", ["x"], freq, "hand-made", "0" * 64)


def test_window_counts_and_alignment():
    values = np.stack([np.arange(10.0), -np.arange(10.0)], axis=1)  # (10, 2)
    starts = window_starts(0, 10, lookback=3, horizon=2, stride=1)
    assert starts.tolist() == [0, 1, 2, 3, 4, 5]  # T - L - H + 1 windows
    windows = SeriesWindows(values, None, pd.RangeIndex(10), starts, 3, 2)
    past, target = windows.past(), windows.target()
    assert past.shape == (6, 3, 2) and target.shape == (6, 2)
    assert past[2, :, 0].tolist() == [2, 3, 4] and past[2, :, 1].tolist() == [-2, -3, -4]
    assert target[2].tolist() == [5, 6]  # the two steps right after the input
    assert window_starts(0, 10, 3, 2, stride=2).tolist() == [0, 2, 4]


def test_eval_windows_may_look_back_into_previous_split_but_targets_stay_inside():
    # rows [12, 16) form the split: targets there, inputs from up to L rows before
    starts = window_starts(12, 16, lookback=4, horizon=2, stride=1)
    assert starts.tolist() == [8, 9, 10]  # 16 - 12 - 2 + 1 = 3 windows
    assert all(s + 4 >= 12 and s + 4 + 2 <= 16 for s in starts)


def config(**window) -> ForecastConfig:
    return ForecastConfig.model_validate(
        {
            "data": {"path": "x.csv", "time_column": "t", "target": "y"},
            "window": {"lookback": 3, "horizon": 2, **window},
            "split": {"train": 0.5, "val": 0.25, "test": 0.25},
        }
    )


def test_scaler_sees_training_rows_only():
    series = hand_made(40)
    prepared = prepare_series(series, config())
    train = series.frame.iloc[:20].to_numpy()
    np.testing.assert_allclose(prepared.scaler.mean, train.mean(axis=0))
    np.testing.assert_allclose(prepared.scaler.std, train.std(axis=0))
    # Blow up every val/test value: the scaler must not move
    series.frame.iloc[20:] *= 1000
    again = prepare_series(series, config())
    np.testing.assert_array_equal(again.scaler.mean, prepared.scaler.mean)
    np.testing.assert_array_equal(again.scaler.std, prepared.scaler.std)


def test_train_targets_never_reach_validation_rows():
    prepared = prepare_series(hand_made(40), config())
    train = prepared.windows("train")
    assert (train.starts + 3 + 2 <= prepared.borders.train_end).all()
    test = prepared.windows("test")
    assert (test.starts + 3 >= prepared.borders.val_end).all()


def test_datamodule_batches_have_documented_shapes():
    cfg = config()
    cfg.data.calendar_features = True
    prepared = prepare_series(hand_made(40), cfg)
    batch = next(iter(ForecastDataModule(prepared, batch_size=4).train_dataloader()))
    assert batch["past"].shape == (4, 3, 2 + 6)  # F=2 series + K=6 calendar (hourly)
    assert batch["future"].shape == (4, 2, 6)
    assert batch["target"].shape == (4, 2)


def test_lookback_longer_than_a_split_is_a_clear_error():
    with pytest.raises(ConfigError, match="does not fit the train split"):
        prepare_series(hand_made(20), config(lookback=9, horizon=2))


def test_calendar_features_are_cyclical():
    index = pd.DatetimeIndex(["2024-01-01 00:00", "2024-01-01 12:00", "2024-01-02 00:00"])
    features = calendar_features(index, sub_daily=True)
    assert features.shape == (3, 6)
    np.testing.assert_allclose(features[0, :2], [0, 1], atol=1e-12)  # midnight
    np.testing.assert_allclose(features[1, :2], [0, -1], atol=1e-12)  # noon
    assert np.all(np.abs(features) <= 1)
