"""The clock a series' timestamps are read on, stored with the model so that every later
timestamp (a request's, an actual's, a file given to `forecast predict`) is read on the same one.

Why it matters: calendar features (hour of day, weekday) are wall-clock features. A model trained
on Berlin local time that is sent "10:00+01:00" and reads it as 09:00 UTC sees every hour shifted
by one (two in summer) and forecasts the wrong part of the day, without any error.

A clock is one of:
  "UTC"     the training file's timestamps carried a zone or an offset; they were converted to UTC
  a zone    ``data.timezone`` (an IANA name, e.g. "Europe/Berlin"): timestamps are that zone's wall
            time; naive ones are read as written, zone-aware ones converted to it
  "local"   naive timestamps in a zone nobody named: wall time as written. A zone-aware timestamp
            cannot be placed on this clock, so it is refused, naming the fix.
A model saved before clocks were stored converted requests to UTC: ``LEGACY`` keeps that."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

UTC_CLOCK = "UTC"
LOCAL = "local"
LEGACY = UTC_CLOCK


LOCAL_REFUSAL = (
    "this model was trained on timestamps without a zone (local time, zone not named): send them "
    "without an offset, as the training file had them, or retrain with data.timezone set"
)


class ClockError(ValueError):
    """A zone-aware timestamp for a model whose training clock has no zone."""


def valid_zone(name: str) -> str:
    """``name`` if it is an IANA time zone; ValueError naming it otherwise."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone name (IANA, e.g. 'Europe/Berlin' or 'UTC')") from None
    return name


def clock_for(zoned: bool, timezone: str | None) -> str:
    """The clock of a training file whose timestamps are ``zoned`` (or not), under ``timezone``."""
    if timezone is not None:
        return timezone
    return UTC_CLOCK if zoned else LOCAL


def is_zoned(text: pd.Series) -> bool:
    """Whether a column's timestamps carry a zone or offset, judged by its first one (a file mixing
    the two is read with the first's rule; pandas reads the rest)."""
    for value in text:
        if value:
            try:
                return pd.Timestamp(value).tzinfo is not None
            except (ValueError, TypeError):
                return False
    return False


def on_clock(utc_times: pd.DatetimeIndex, zoned: bool, timezone: str | None) -> pd.DatetimeIndex:
    """Timestamps parsed with ``utc=True`` (zone-aware converted to UTC, naive read as written) ->
    naive wall times on the clock ``clock_for(zoned, timezone)``."""
    if zoned and timezone is not None:
        return utc_times.tz_convert(timezone).tz_localize(None)
    return utc_times.tz_convert(None)


def stamp_on_clock(stamp: datetime, clock: str) -> datetime | None:
    """One request timestamp on the model's clock, naive: a naive one as written, a zone-aware one
    converted (ClockError on a "local" clock); None when the conversion leaves the calendar."""
    if stamp.tzinfo is None:
        return stamp
    if clock == LOCAL:
        raise ClockError(LOCAL_REFUSAL)
    try:
        zone = UTC if clock == UTC_CLOCK else ZoneInfo(clock)
        return stamp.astimezone(zone).replace(tzinfo=None)
    except (OverflowError, ValueError):
        return None
