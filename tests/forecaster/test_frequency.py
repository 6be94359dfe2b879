"""The forecast steps after a window's last timestamp: the service computes them for every request
that sends timestamps, so fixed-length steps take a numpy fast path that must agree with pandas'
offsets exactly, and must refuse (not wrap around) past the end of pandas' calendar. Data given to a
trained model must be at its frequency (gaps allowed: the fill policy's), or both are named."""

import warnings

import numpy as np
import pandas as pd
import pytest

from forecaster.data.frequency import (
    describe_step,
    frequency_mismatch,
    infer_frequency,
    seasonal_period,
    step_of,
    steps_after,
)


def pandas_steps(last: np.ndarray, freq: str, horizon: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        index = pd.DatetimeIndex(last)
        return np.stack([(index + h * step_of(freq)).values for h in range(1, horizon + 1)], axis=1)


@pytest.mark.parametrize("unit", ["s", "us", "ns"])
@pytest.mark.parametrize("freq", ["h", "15min", "30s", "D", "2D", "W", "W-SUN", "B", "MS"])
def test_steps_after_agree_with_pandas_offsets(freq, unit):
    last = pd.date_range("2020-01-06", periods=40, freq=freq).values[np.random.default_rng(0).permutation(40)]
    last = last.astype(f"datetime64[{unit}]")
    got, expected = steps_after(last, freq, 24), pandas_steps(last, freq, 24)
    assert got.shape == (40, 24)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("unit", ["s", "us"])
def test_steps_after_dates_beyond_the_nanosecond_calendar_in_their_own_unit(unit):
    """A CSV of the year 1500 or 3000 loads as microseconds under pandas 3: its forecast steps
    are right, not wrapped around through nanoseconds."""
    for start in ("1500-01-01", "3000-01-01"):
        last = np.array([start], dtype=f"datetime64[{unit}]")
        expected = np.array([start], dtype="datetime64[D]") + np.arange(1, 4)
        np.testing.assert_array_equal(steps_after(last, "D", 3)[0], expected)


@pytest.mark.parametrize("freq", ["h", "D"])
def test_steps_past_the_calendar_raise_as_pandas_does(freq):
    near_end = np.array([pd.Timestamp.max.floor("h") - pd.Timedelta(hours=3)], dtype="datetime64[ns]")
    with pytest.raises(OverflowError):
        pandas_steps(near_end, freq, 5)
    with pytest.raises(OverflowError, match="leave pandas' calendar"):
        steps_after(near_end, freq, 5)
    assert steps_after(near_end - np.timedelta64(10, "D"), freq, 5).shape == (1, 5)
    with pytest.raises(OverflowError):  # a span too long for int64 nanoseconds must not wrap around
        steps_after(near_end - np.timedelta64(200 * 365, "D"), "7D", 20_000)


@pytest.mark.parametrize(
    ("freq", "period"), [("MS", 12), ("ME", 12), ("QS", 4), ("QE", 4), ("YS", 1), ("YE", 1)]
)
def test_monthly_quarterly_and_yearly_stamps_are_inferred_as_calendar_steps(freq, period):
    """Months are 28 to 31 days: a fixed "31D" step would put most months off its grid."""
    index = pd.date_range("2000-01-01", periods=30, freq=freq)
    assert infer_frequency(index) == freq and seasonal_period(freq) == period


def test_a_monthly_step_off_the_month_boundaries_stays_a_fixed_step():
    index = pd.DatetimeIndex(["2000-01-15", "2000-02-15", "2000-03-17", "2000-04-17"])
    assert infer_frequency(index) == "31D"


def dates(start: str, periods: int, freq: str, drop: tuple[int, ...] = ()) -> pd.DatetimeIndex:
    return pd.date_range(start, periods=periods, freq=freq).delete(list(drop))


@pytest.mark.parametrize(
    ("index", "freq"),
    [
        (dates("1991-01-01", 100, "D", drop=(5, 40)), "D"),  # a few gaps: the fill policy's
        (dates("1991-01-01", 3, "D"), "D"),
        (dates("2020-01-01", 60, "B", drop=(3, 20)), "B"),  # weekends and holidays missing
        (dates("2020-01-02", 5, "B"), "B"),  # too few to infer B: the steps still are
        (dates("2000-01-01", 30, "MS", drop=(4,)), "MS"),
        (dates("2000-03-31", 12, "QE"), "QE"),
        (dates("2000-01-02", 50, "W"), "7D"),
        (dates("2016-07-01", 48, "h"), "h"),
        (dates("2016-07-01", 1, "h"), "D"),  # one stamp: no step to compare
    ],
)
def test_data_at_the_models_frequency_passes(index, freq):
    assert frequency_mismatch(index, freq) is None


@pytest.mark.parametrize(
    ("index", "freq", "data"),
    [
        (dates("1991-01-01", 100, "h"), "D", "the data is hourly (h)"),
        (dates("1991-01-01", 30, "W"), "D", "the data is weekly (7D)"),
        (dates("2020-01-01", 200, "5B"), "B", "the data is weekly (7D)"),  # every 5th business day
        (dates("2020-01-01", 30, "D"), "B", "the data is daily (D)"),
        (dates("2020-01-01", 30, "B"), "D", "the data is business days (B)"),
        (dates("2000-01-31", 30, "ME"), "MS", "the data is monthly (ME)"),
        (dates("2016-07-01", 50, "30min"), "h", "the data is every 30min (30min)"),
        (dates("1991-01-01", 2, "h"), "D", "the data is spaced 0 days 01:00:00"),  # too short to infer
    ],
)
def test_data_at_another_frequency_names_both(index, freq, data):
    mismatch = frequency_mismatch(index, freq)
    assert mismatch is not None and mismatch.startswith(data), mismatch
    assert f"this model's data is {describe_step(freq)}" in mismatch


@pytest.mark.parametrize(
    ("index", "freq"),
    [
        (dates("2020-01-01", 60, "B"), "D"),  # weekdays only, trained as days: weekends filled
        (dates("2016-07-01", 60, "2h"), "h"),  # 2-hourly, trained as hourly
        (dates("1991-01-01", 100, "D", drop=(5, 40)), "D"),
        (dates("2020-01-01", 30, "W-WED"), "D"),
        (dates("2000-01-01", 30, "QS"), "MS"),  # on month starts
        (dates("2020-01-01", 60, "B", drop=(3,)), "B"),
    ],
)
def test_data_on_the_grid_of_a_frequency_set_in_the_models_config_passes(index, freq):
    """A model trained with data.frequency set may have read sparser data, upsampled by its fill
    policy: its own training file (weekdays for a daily model) must pass, as it did in training."""
    assert frequency_mismatch(index, freq, given=True) is None


@pytest.mark.parametrize(
    ("index", "freq", "data", "off"),
    [
        (dates("1991-01-01", 100, "h"), "D", "the data is hourly (h)", "1991-01-01 01:00:00"),
        (dates("2016-07-01", 50, "30min"), "h", "the data is every 30min (30min)", "2016-07-01 00:30:00"),
        (dates("2020-01-01", 30, "D"), "B", "the data is daily (D)", "2020-01-04 00:00:00"),  # a Saturday
        (dates("2020-01-01", 60, "h"), "B", "the data is hourly (h)", "2020-01-01 01:00:00"),
        (dates("2000-01-31", 30, "ME"), "MS", "the data is monthly (ME)", "2000-01-31 00:00:00"),
    ],
)
def test_data_off_the_grid_of_a_frequency_set_in_the_models_config_is_refused(index, freq, data, off):
    """Hourly stamps are off a daily grid, whatever the model's config: read as days, they would
    be forecast as days."""
    expected = f"{data}, but this model's data is {describe_step(freq)} ({off} is off its grid)"
    assert frequency_mismatch(index, freq, given=True) == expected
