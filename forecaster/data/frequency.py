"""Frequency inference and the seasonal period that goes with it.

Trading-day series (stocks) are recognised as business-day frequency ``B``: missing weekdays are
market holidays, not gaps.
"""

from __future__ import annotations

import warnings

import numpy as np
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
        return calendar_frequency(index, days) or ("D" if days == 1 else f"{days}D")
    return pd.tseries.frequencies.to_offset(step).freqstr


# steps of a month, a quarter or a year vary in days; the stamps' place in the calendar names them
CALENDAR_UNITS = (
    ("M", range(28, 32), "is_month_start", "is_month_end"),
    ("Q", range(89, 93), "is_quarter_start", "is_quarter_end"),
    ("Y", range(365, 367), "is_year_start", "is_year_end"),
)


def calendar_frequency(index: pd.DatetimeIndex, days: int) -> str | None:
    """ "MS" for monthly stamps on the 1st, "ME" on month ends, and so on for quarters and years;
    None unless every stamp sits there (a fixed "31D" would drift off the months)."""
    for unit, lengths, starts, ends in CALENDAR_UNITS:
        if days in lengths:
            if getattr(index, starts).all():
                return f"{unit}S"
            if getattr(index, ends).all():
                return f"{unit}E"
    return None


def _is_weekday_only(index: pd.DatetimeIndex) -> bool:
    """Weekdays only, and enough of them (10) that a missing weekend is no accident."""
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


def steps_after(last: np.ndarray, freq: str, horizon: int) -> np.ndarray:
    """(N,) timestamps -> (N, horizon): the ``horizon`` steps after each at ``freq``, in the
    input's unit (as pandas gives them).

    Nanosecond input with a fixed-length step (hours, minutes, days) is one broadcast add: the
    service computes these for every request that sends timestamps (it holds them as
    nanoseconds), and the pandas loop per step cost more CPU than the network's forward pass.
    Everything else (calendar steps such as business days and months, other units) goes through
    pandas' offsets. Raises OverflowError where a step would leave the nanosecond calendar, as
    pandas does (a plain numpy add would wrap around instead)."""
    step = _fixed_length(freq)
    base = np.asarray(last)
    if step is None or base.dtype != np.dtype("datetime64[ns]"):
        stamps = pd.DatetimeIndex(base)
        offset = step_of(freq)
        return np.stack([(stamps + h * offset).values for h in range(1, horizon + 1)], axis=1)
    span = int(step.value)  # ns; Python ints: the bound below cannot wrap around either
    if len(base) and int(base.max().astype(np.int64)) > pd.Timestamp.max.value - span * horizon:
        latest = pd.Timestamp(base.max())
        raise OverflowError(f"{horizon} steps of {freq} after {latest} leave pandas' calendar")
    return base[:, None] + np.timedelta64(span, "ns") * np.arange(1, horizon + 1)  # (N, H)


def _fixed_length(freq: str) -> pd.Timedelta | None:
    """The step as a duration, or None for calendar steps (months, business days)."""
    try:
        return pd.Timedelta(step_of(freq))
    except ValueError:
        return None


def describe_step(freq: str) -> str:
    """'h' -> 'hourly (h)', 'D' -> 'daily (D)', 'B' -> 'business days (B)', for messages."""
    names = {
        "h": "hourly",
        "D": "daily",
        "B": "business days",
        "W": "weekly",
        "7D": "weekly",
        "MS": "monthly",
        "ME": "monthly",
    }
    return f"{names.get(freq, 'every ' + freq)} ({freq})"


def first_off_step(index: pd.DatetimeIndex, freq: str) -> tuple[int, str] | None:
    """Where timestamps stop following ``freq``: (position, why), or None when they all do.

    Business-day series may skip weekdays (market holidays) but never land on a weekend or jump
    more than a week; every other frequency must step exactly one period at a time, so that the
    future timestamps and calendar features the model derives from the last stamp are right."""
    if len(index) < 2:
        return None
    every = describe_step(freq)
    if is_business_day(freq):
        weekend = np.flatnonzero(index.dayofweek >= 5)
        if weekend.size:
            k = int(weekend[0])
            return k, f"{index[k]} falls on a weekend; this model's data is on {every}"
        steps = index[1:] - index[:-1]
        off = (
            (steps <= pd.Timedelta(0))
            | (steps > pd.Timedelta(days=7))
            | (steps % pd.Timedelta(days=1) != pd.Timedelta(0))
        )
    elif _fixed_length(freq) is not None:  # hours, minutes, days: plain integer arithmetic
        off = np.diff(index.values) != _fixed_length(freq).to_timedelta64()
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pd.errors.PerformanceWarning)  # non-tick offsets, few items
            expected = index[:-1] + step_of(freq)
        off = np.asarray(index[1:] != expected)
    bad = np.flatnonzero(off)
    if not bad.size:
        return None
    k = int(bad[0]) + 1
    return (
        k,
        f"{index[k]} is {index[k] - index[k - 1]} after the previous timestamp; this model's data is {every}",
    )


def frequency_mismatch(index: pd.DatetimeIndex, freq: str, given: bool = False) -> str | None:
    """Why timestamps are not at a model's frequency ``freq``, or None when they are.

    The offline analogue of ``first_off_step``: a whole file, so gaps are allowed (the model's fill
    policy decides them, as in training) and what matters is the most common step, which must be
    one step of ``freq``. The steps themselves are compared, not an inferred frequency's name: a
    short file, or business days with fewer than 10 rows, infers nothing reliable. Business-day
    models take no weekend stamp; daily models take no weekday-only series (business days).

    ``given``: ``freq`` was set in the model's config (data.frequency), not inferred from its data.
    Such a model may have been trained on sparser data (weekdays only read as days, 2-hourly as
    hours) upsampled by its fill policy, so its own file must pass: the data only has to lie on the
    grid of ``freq`` (``first_off_grid``), and the fill policy upsamples it as in training."""
    if len(index) < 2:
        return None
    if given:
        off = first_off_grid(index, freq)
        return None if off is None else _mismatch(index, freq, f" ({index[off]} is off its grid)")
    one = _one_step_apart(index, freq)
    if not one.all():
        gaps = pd.Series(index[1:] - index[:-1])[~one]
        if one.sum() < gaps.value_counts().iloc[0]:  # another step is the most common
            return _mismatch(index, freq)
    if is_business_day(freq) and (index.dayofweek >= 5).any():
        return _mismatch(index, freq, f" ({index[np.argmax(index.dayofweek >= 5)]} falls on a weekend)")
    if _fixed_length(freq) == pd.Timedelta(days=1) and _is_weekday_only(index):
        return _mismatch(index, freq)
    return None


def first_off_grid(index: pd.DatetimeIndex, freq: str) -> int | None:
    """The position of the first timestamp off ``freq``'s grid, or None when all lie on it: for
    fixed-length steps, every step a whole number of them (hourly stamps are off a daily grid);
    for business days, whole days and no weekend; for calendar steps, every stamp on the offset
    (month starts for MS). Steps missing on the way are gaps, the fill policy's."""
    steps = index[1:] - index[:-1]
    if is_business_day(freq):
        off = np.asarray(index.dayofweek >= 5)
        off[1:] |= np.asarray(steps % pd.Timedelta(days=1) != pd.Timedelta(0))
    elif (step := _fixed_length(freq)) is not None:
        off = np.concatenate([[False], np.asarray(steps % step != pd.Timedelta(0))])
    else:
        offset = step_of(freq)
        off = np.array([not offset.is_on_offset(stamp) for stamp in index])
    bad = np.flatnonzero(off)
    return int(bad[0]) if bad.size else None


def _one_step_apart(index: pd.DatetimeIndex, freq: str) -> np.ndarray:
    """(n-1,) whether each timestamp is exactly one ``freq`` step after the previous one (for
    business days: the next business day, whatever weekend lies between)."""
    if is_business_day(freq):
        whole_days = (index[1:] - index[:-1]) % pd.Timedelta(days=1) == pd.Timedelta(0)
        days = index.values.astype("datetime64[D]")
        return np.asarray(whole_days) & (np.busday_count(days[:-1], days[1:]) == 1)
    step = _fixed_length(freq)
    if step is not None:
        return np.diff(index.values) == step.to_timedelta64()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)  # non-tick offsets
        return np.asarray(index[1:] == index[:-1] + step_of(freq))


def _mismatch(index: pd.DatetimeIndex, freq: str, detail: str = "") -> str:
    """'the data is hourly (h), but this model's data is daily (D)': the data's frequency as
    inferred, or where the file is too short to infer one, its first step."""
    data = describe_step(infer_frequency(index)) if len(index) >= 3 else ""
    if not data or data == describe_step(freq):
        data = f"spaced {index[1] - index[0]} ({index[0]} to {index[1]})"
    return f"the data is {data}, but this model's data is {describe_step(freq)}{detail}"
