"""The grid an actual must be on, judged by phase from an anchor (a logged forecast step of its
series), for fixed-length and calendar frequencies alike, and how far ahead it may go."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitoring.grid import Grid


def times(*stamps: str) -> np.ndarray:
    return np.array(stamps, dtype="datetime64[us]")


def anchored(at: str, n: int) -> np.ndarray:
    return np.full(n, np.datetime64(at, "us"))


def test_a_fixed_step_is_judged_by_its_phase_from_the_anchor_far_from_any_forecast():
    """Every 7 days from a Wednesday: a Wednesday years before is on it, a Thursday is not, and
    so is 30:30 hours after a daily step (a day and a half past it)."""
    weekly = Grid("7D")
    given = times("2021-06-02", "2019-01-02", "2021-06-03", "2021-06-09T12:00")
    assert weekly.off(given, anchored("2021-06-02", 4)).tolist() == [False, False, True, True]
    daily = Grid("D")
    late = times("2021-06-03T06:30")
    assert daily.off(late, anchored("2021-06-02", 1)).tolist() == [True]
    before, after = daily.neighbours(late[0], np.datetime64("2021-06-02", "us"))
    assert (before, after) == (pd.Timestamp("2021-06-03"), pd.Timestamp("2021-06-04"))


def test_a_calendar_step_needs_the_offset_and_the_anchors_time_of_day():
    business = Grid("B")
    given = times("2024-01-08T09:00", "2024-01-06T09:00", "2024-01-08T10:00", "2024-01-08T09:00")
    anchors = np.array(["2024-01-05T09:00"] * 3 + ["NaT"], dtype="datetime64[us]")
    assert business.off(given, anchors).tolist() == [False, True, True, False]  # the last: no anchor
    saturday = business.neighbours(given[1], anchors[1])
    assert saturday == (pd.Timestamp("2024-01-05T09:00"), pd.Timestamp("2024-01-08T09:00"))
    monthly = Grid("MS")
    assert monthly.off(times("2024-03-01", "2024-03-15"), anchored("2024-01-01", 2)).tolist() == [False, True]
    assert monthly.neighbours(times("2024-03-15")[0], np.datetime64("2024-01-01", "us")) == (
        pd.Timestamp("2024-03-01"),
        pd.Timestamp("2024-04-01"),
    )


def test_the_reach_is_one_horizon_of_steps_past_the_latest():
    latest = times("2024-01-31", "NaT")
    horizons = np.array([3, 0])
    assert Grid("MS").limits(times("2024-01-01", "NaT"), horizons)[0] == np.datetime64("2024-04-01")
    hourly = Grid("h").limits(latest, horizons)
    assert hourly[0] == np.datetime64("2024-01-31T03:00") and np.isnat(hourly[1])
