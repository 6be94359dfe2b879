"""The rules every series of timestamps in a request follows, predict's (service/validation.py)
and actuals' (service/actuals.py) alike, written once: one timestamp per value, all zone-aware or
all naive, each within the range pandas can represent. Each check returns the ProblemItem naming
the first bad stamp (``series[i].timestamps[k]``), or None."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from service.parsing import ProblemItem

EARLIEST = pd.Timestamp.min.ceil("us").to_pydatetime()
LATEST = pd.Timestamp.max.floor("us").to_pydatetime()
PANDAS_RANGE = f"{EARLIEST:%Y-%m-%d %H:%M:%S} to {LATEST:%Y-%m-%d %H:%M:%S}"


def shape_problem(timestamps: list[datetime], values: int, where: list[str | int]) -> ProblemItem | None:
    """``values`` timestamps, all with a zone (or offset) or none: a mix has no one clock."""
    if len(timestamps) != values:
        return ProblemItem(where, f"{len(timestamps)} timestamps for {values} values", "length_mismatch")
    zoned = [stamp.tzinfo is not None for stamp in timestamps]
    if any(zoned) and not all(zoned):
        message = "a mix of zone-aware and naive timestamps: give all with a zone (or offset) or none"
        return ProblemItem([*where, zoned.index(not zoned[0])], message, "mixed_zones")
    return None


def out_of_range(stamp: datetime, where: list[str | int]) -> ProblemItem:
    """``stamp`` (as sent) lies outside what a timestamp can take."""
    message = f"{stamp.isoformat()} is outside the range timestamps can take ({PANDAS_RANGE})"
    return ProblemItem(where, message, "out_of_range")
