"""The clock a series' timestamps are read on, stored with the model so that every later
timestamp (a request's, an actual's, a file given to `forecast predict`) is read on the same one.

Why it matters: calendar features (hour of day, weekday) are wall-clock features. A model trained
on Berlin local time that is sent "10:00+01:00" and reads it as 09:00 UTC sees every hour shifted
by one (two in summer) and forecasts the wrong part of the day, without any error.

A clock is one of:
  "UTC"     zone-aware timestamps are converted to UTC; naive ones are read as written. What a
            training file with offsets gets by default.
  a zone    ``data.timezone`` (an IANA name, e.g. "Europe/Berlin"): zone-aware timestamps are
            converted to that zone's wall time, naive ones read as written, so calendar features
            are local hours. Wall times repeat an hour when the clocks go back: for sub-daily data
            across a DST change, leave the zone out (UTC) or the load stops at the repeated hour.
  "local"   naive timestamps in a zone nobody named: wall time as written, and a zone-aware
            timestamp's wall time is taken as written too (its offset dropped), since nothing says
            how to convert it. What a training file without offsets gets by default.
A model saved before clocks were stored converted every zone-aware timestamp to UTC: ``LEGACY``.
`forecast predict`, `evaluate` and `retrain` read files on the model's clock (data.timezone set
to it), the service reads requests and actuals on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from forecaster.data.time_formats import order_to_keep, parse_column

UTC_CLOCK = "UTC"
LOCAL = "local"
LEGACY = UTC_CLOCK
OFFSET = r"\s*(?:Z|[+-]\d{2}(?::?\d{2})?)$"  # a zone designator at the end of an ISO timestamp
SAMPLE = 100  # leading values that decide whether a column's timestamps carry zones


def valid_zone(name: str) -> str:
    """``name`` if it is a clock: "local", "UTC" or an IANA time zone; ValueError naming it."""
    if name == LOCAL:
        return name
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"{name!r} is not a time zone name (IANA, e.g. 'Europe/Berlin' or 'UTC'; or 'local')"
        ) from None
    return name


def clock_for(zoned: bool, timezone: str | None) -> str:
    """The clock of a file whose timestamps are ``zoned`` (or not), read under ``timezone``."""
    if timezone is not None:
        return timezone
    return UTC_CLOCK if zoned else LOCAL


def is_zoned(text: pd.Series) -> bool:
    """Whether a column's timestamps carry a zone or offset, judged by the first that parses
    among its leading values (a file mixing the two is read with that one's rule)."""
    for value in text.iloc[:SAMPLE]:
        try:
            return pd.Timestamp(value).tzinfo is not None
        except (ValueError, TypeError):
            continue
    return False


def parse_on_clock(
    text: pd.Series, timezone: str | None, time_format: str | None = None, series: np.ndarray | None = None
) -> tuple[pd.DatetimeIndex, str, str | None]:
    """A column of timestamp text -> naive wall times on its clock (NaT where unparseable), read
    with one format for the whole column (``time_formats.py``; ``time_format`` when given), that
    clock, and the format a model keeps to read later files in the same order (or None)."""
    zoned = is_zoned(text)
    clock = clock_for(zoned, timezone)
    if zoned and clock == LOCAL:  # the wall time as written, offsets dropped
        stripped = text.str.replace(OFFSET, "", regex=True)
        parsed = parse_column(stripped, utc=False, time_format=time_format, series=series)
        return parsed.times, clock, order_to_keep(parsed)
    parsed = parse_column(text, utc=True, time_format=time_format, series=series)
    kept = order_to_keep(parsed)
    if zoned and clock != UTC_CLOCK:
        return parsed.times.tz_convert(clock).tz_localize(None), clock, kept
    return parsed.times.tz_convert(None), clock, kept


def stamp_on_clock(stamp: datetime, clock: str) -> datetime | None:
    """One request timestamp on the model's clock, naive; None when the conversion leaves the
    calendar."""
    if stamp.tzinfo is None:
        return stamp
    if clock == LOCAL:
        return stamp.replace(tzinfo=None)
    try:
        zone = UTC if clock == UTC_CLOCK else ZoneInfo(clock)
        return stamp.astimezone(zone).replace(tzinfo=None)
    except (OverflowError, ValueError):
        return None


# the furthest any zone's wall time is ahead of UTC (Kiribati, UTC+14): on the local clock, whose
# zone nobody named, the latest the time can be anywhere
AHEAD_OF_UTC = timedelta(hours=14)


def now_on_clock(clock: str) -> datetime:
    """The time now as a wall time on ``clock``, naive (what request timestamps are put on). On
    the local clock no zone is known: the latest wall time anywhere, so that nothing observed
    already is taken for the future. The same on the UTC clock, which is also what a model saved
    before clocks were kept reads its naive stamps on (``LEGACY``): those may be local wall times."""
    now = datetime.now(UTC)
    if clock in (LOCAL, UTC_CLOCK):
        return (now + AHEAD_OF_UTC).replace(tzinfo=None)
    zone = UTC if clock == UTC_CLOCK else ZoneInfo(clock)
    return now.astimezone(zone).replace(tzinfo=None)


def instants_on_clock(instants: np.ndarray, clock: str) -> np.ndarray:
    """Instants given as UTC (the pyfunc's unix seconds) -> wall times on a zone's clock; on the
    UTC and local clocks the seconds are taken as the wall time they spell, as before."""
    if clock in (UTC_CLOCK, LOCAL):
        return instants
    flat = pd.DatetimeIndex(np.ravel(instants)).tz_localize(UTC).tz_convert(clock).tz_localize(None)
    return flat.values.reshape(np.shape(instants))
