"""Frequency inference and the seasonal period that goes with it.

Trading-day series (stocks) are recognised as business-day frequency ``B``: missing weekdays are
market holidays, not gaps.
"""

from __future__ import annotations

import pandas as pd

BUSINESS_DAY = "B"


def infer_frequency(index: pd.DatetimeIndex) -> str:
    """The series' step as a pandas offset alias, from the most common spacing of timestamps."""
    if len(index) < 3:
        raise ValueError("at least 3 timestamps are needed to infer a frequency")
    step = pd.Series(index[1:] - index[:-1]).mode().iloc[0]
    if step == pd.Timedelta(days=1) and _is_weekday_only(index):
        return BUSINESS_DAY
    if step % pd.Timedelta(days=1) == pd.Timedelta(0):
        days = step // pd.Timedelta(days=1)
        return "D" if days == 1 else f"{days}D"
    return pd.tseries.frequencies.to_offset(step).freqstr


def _is_weekday_only(index: pd.DatetimeIndex) -> bool:
    return bool((index.day_of_week < 5).all()) and len(index) >= 10


def is_business_day(freq: str) -> bool:
    return freq.upper() in {"B", "C"}


def step_of(freq: str) -> pd.DateOffset:
    return pd.tseries.frequencies.to_offset(freq)


def seasonal_period(freq: str) -> int:
    """Period of the seasonal-naive baseline: a day for sub-daily data, a week for daily (5 for
    trading days), a year for weekly/monthly/quarterly."""
    if is_business_day(freq):
        return 5
    offset = step_of(freq)
    try:
        delta = pd.Timedelta(offset)
    except ValueError:  # calendar offsets (months, quarters, years) have no fixed length
        name = offset.name.upper()
        if name.startswith("Q"):
            return 4
        if name.startswith(("Y", "A")):
            return 1
        return 12
    if delta < pd.Timedelta(days=1):
        return max(1, int(pd.Timedelta(days=1) / delta))
    if delta == pd.Timedelta(days=1):
        return 7
    if delta == pd.Timedelta(weeks=1):
        return 52
    return 1


def future_index(last: pd.Timestamp, freq: str, horizon: int) -> pd.DatetimeIndex:
    """The ``horizon`` timestamps after ``last`` at the series' frequency (business days skip
    weekends; holidays cannot be known from the data alone)."""
    return pd.date_range(start=last, periods=horizon + 1, freq=freq)[1:]
