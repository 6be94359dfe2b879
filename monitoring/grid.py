"""Where an actual of a series may fall: on the grid of the served model's frequency, and not
further ahead than one horizon past the series' latest logged forecast step.

Why these two and nothing else: an actual's stored value scores the forecasts at its time and
becomes `forecast retrain`'s data (the model's own, extended with the actuals). A value off the
grid (13:00 of a daily series) can be neither: retrain refuses data off its frequency, so one
stored value stops it for good. A value years ahead opens a gap of years in retrain's data. A
value on the grid anywhere else is what happened at a step of the series: it is taken whether
or not a forecast reaches it (between forecasts made less often than every H steps, after
forecasts that were dropped or pruned, before the first one), since retrain needs the series
whole.

The grid is judged by phase, not by looking for a logged step at the time: anchored at any
logged forecast step of the series (its latest), a fixed-length frequency ('h', 'D', '7D') puts a
time on it when it is a whole number of steps from the anchor; a calendar one ('B', 'MS', 'W-SUN')
when the offset is on it and the time of day is the anchor's. Every check is vectorised over a
request's values (a request of thousands of series costs one pass), and only the values a
message names are looked at one by one."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.data.frequency import describe_step
from monitoring.records import calendar_of

NOT_A_TIME = np.datetime64("NaT", "us")


@dataclass(frozen=True)
class Grid:
    """The served model's frequency, as the checks need it."""

    frequency: str

    @property
    def offset(self) -> pd.DateOffset:
        return calendar_of(self.frequency)[1]

    @property
    def fixed(self) -> np.timedelta64 | None:
        """The step as microseconds, or None for calendar steps (months, business days)."""
        fixed = calendar_of(self.frequency)[2]
        return None if fixed is None else fixed.astype("timedelta64[us]")

    def described(self) -> str:
        return describe_step(self.frequency)

    def off(self, times: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        """Whether each of ``times`` (datetime64[us]) is off the grid anchored at its ``anchors``
        (NaT: the series has no logged step; then only what needs no anchor is judged: a
        calendar offset's days, never a fixed-length step's phase)."""
        anchored = ~np.isnat(anchors)
        fixed = self.fixed
        if fixed is None:
            same_time = ~anchored | (time_of_day(times) == time_of_day(anchors))
            return ~(self.on_offset(times) & same_time)
        span = np.int64(fixed.astype(np.int64))
        apart = (times - np.where(anchored, anchors, times)).astype(np.int64)
        return anchored & (np.mod(apart, span) != 0)

    def on_offset(self, times: np.ndarray) -> np.ndarray:
        """The calendar offset's own test, once per distinct time (a request's values share few:
        the same day for every series of a daily job)."""
        distinct, where = np.unique(times, return_inverse=True)
        offset = self.offset
        on = np.fromiter((offset.is_on_offset(pd.Timestamp(t)) for t in distinct), bool, len(distinct))
        return on[where.reshape(-1)]

    def limits(self, latest: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        """The furthest time an actual may have: each ``latest`` step plus ``horizons`` steps."""
        fixed = self.fixed
        if fixed is None:
            return self.calendar_limits(latest, horizons)
        return latest + fixed * horizons.astype(np.int64)

    def calendar_limits(self, latest: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        """``limits`` for calendar steps: one vectorised offset per distinct horizon (one, in
        practice: every forecast of a model has its horizon)."""
        limits = np.full(len(latest), NOT_A_TIME)
        for horizon in np.unique(horizons).tolist():
            mine = horizons == horizon
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pd.errors.PerformanceWarning)  # non-tick offsets
                moved = pd.DatetimeIndex(latest[mine]) + int(horizon) * self.offset
            limits[mine] = moved.to_numpy().astype("datetime64[us]")
        return limits

    def neighbours(self, time: np.datetime64, anchor: np.datetime64) -> tuple[pd.Timestamp, pd.Timestamp]:
        """The grid's steps either side of an off-grid ``time`` (for the message that refuses it)."""
        fixed = self.fixed
        at = pd.Timestamp(time)
        if fixed is not None:  # off the grid only when anchored
            phase = np.mod((time - anchor).astype(np.int64), fixed.astype(np.int64))
            before = at - pd.Timedelta(int(phase), "us")
            return before, before + pd.Timedelta(fixed)
        offset = self.offset
        if np.isnat(anchor):  # the offset's days, at the time's own time of day
            return offset.rollback(at), offset.rollforward(at)
        base = pd.Timestamp(time.astype("datetime64[D]") + time_of_day(np.asarray([anchor]))[0])
        earlier = base if base <= at else base - pd.Timedelta(days=1)
        later = base if base > at else base + pd.Timedelta(days=1)
        return offset.rollback(earlier), offset.rollforward(later)


def time_of_day(times: np.ndarray) -> np.ndarray:
    """datetime64[us] -> timedelta64[us] since their midnight (NaT stays NaT)."""
    return times - times.astype("datetime64[D]").astype("datetime64[us]")
