"""One format for a whole time column.

pandas' ``format="mixed"`` guesses each value's format on its own, so "01/02/2000" (read month
first, January 2) and "13/02/2000" (which only parses day first, February 13) land in one column
read two ways, and a day-first monthly file comes out as scattered days: a gap check then asks for
thousands of missing steps, or a fill policy invents them. Here the day-month order is decided
once for the whole column:

* a column that starts with a year (ISO 8601, "2024/01/02", "2024-01-01 00:00:00 UTC") is never
  read day first: ISO 8601 where it fits, pandas' per-value parser for what it does not;
* otherwise the format of the first readable value. Where that value reads both ways
  ("01/02/2000"), the order under which more of the column parses wins (a later "13/02/2000"
  makes it day first); a column that parses as well both ways and reads differently is refused
  until ``data.time_format`` says which it is. A row the chosen format misses is read again with
  the same order, its date alone or with other seconds ("01/02/2024" beside "01/02/2024 01:00");

and the format used is returned, so that training stores it with the model (a short file given
to `forecast predict` later may hold no day above 12 to decide by).
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

import pandas as pd
from pandas.tseries.api import guess_datetime_format

from forecaster.errors import DataError

YEAR_FIRST = re.compile(r"^\d{4}[-/.]\d{1,2}")  # a year first: never day first
ISO = "ISO8601"
MIXED = "mixed"  # pandas' per-value parser: only where nothing decides an order
SAMPLE = 100  # leading values looked at for one whose format can be guessed


class Parsed(NamedTuple):
    times: pd.DatetimeIndex  # NaT where a value does not parse
    time_format: str | None  # the format every row was read with; None: no one format decided


def guessed(value: str, dayfirst: bool) -> str | None:
    with warnings.catch_warnings():  # pandas warns when a value only reads the other way round
        warnings.simplefilter("ignore")
        return guess_datetime_format(value, dayfirst=dayfirst)


def first_formats(text: pd.Series) -> tuple[str, ...]:
    """The formats the column's first guessable value reads with: (ISO,) for a year first, one
    format, two (month first, day first) when it reads both ways, or none (unix times, say)."""
    for value in text.iloc[:SAMPLE]:
        if YEAR_FIRST.match(value):
            return (ISO,)
        month_first, day_first = guessed(value, dayfirst=False), guessed(value, dayfirst=True)
        if month_first and day_first and month_first != day_first:
            return month_first, day_first
        if month_first or day_first:
            return (month_first or day_first,)
    return ()


def parse_column(text: pd.Series, utc: bool, time_format: str | None = None) -> Parsed:
    """Timestamps of a text column read with one day-month order (the module docstring says how),
    and the format that was; ``time_format`` when given. DataError when the column reads as well
    day first as month first, differently, and nothing says which."""
    formats = first_formats(text)
    if time_format is not None:
        times = read(text, utc, time_format)
        if not (times.isna().any() and formats == (ISO,)):
            return Parsed(times, time_format)
        # a year-first file given to a model that keeps a day-month order: no order to keep there
    if not formats:
        return Parsed(read(text, utc, MIXED), None)
    if formats == (ISO,):
        times = read(text, utc, ISO)
        if times.isna().any():  # "... UTC", "2024/01/02": year first, so never day first
            year_first = text.where(text.str.match(YEAR_FIRST))  # a row that is not: named, not guessed
            times = times.where(times.notna(), read(year_first, utc, MIXED))
        return Parsed(times, None)  # nothing to keep: a year first fixes the order
    if len(formats) == 1:
        return Parsed(with_variants(text, utc, formats[0]), formats[0])
    readings = [with_variants(text, utc, fmt) for fmt in formats]
    read_rows = [int(reading.notna().sum()) for reading in readings]
    if read_rows[0] == read_rows[1]:
        both = readings[0].notna() & readings[1].notna()
        if not readings[0][both].equals(readings[1][both]):
            example = text[both][readings[0][both] != readings[1][both]].iloc[0]
            raise DataError(
                f"timestamps like {example!r} read both month first ({formats[0]}) and day first "
                f"({formats[1]}); set data.time_format to the one meant, e.g. "
                f"--set 'data.time_format={formats[1]}' (in a YAML file, quoted: "
                f'time_format: "{formats[1]}")'
            )
    chosen = 0 if read_rows[0] >= read_rows[1] else 1
    return Parsed(readings[chosen], formats[chosen])


def order_to_keep(parsed: Parsed) -> str | None:
    """The format a model stores (``data.time_format``) so that later files are read in the same
    day-month order: one with a numeric day and month, whose order a short file may not decide."""
    fmt = parsed.time_format
    return fmt if fmt is not None and "%d" in fmt and "%m" in fmt else None


def with_variants(text: pd.Series, utc: bool, time_format: str) -> pd.DatetimeIndex:
    """``text`` read with ``time_format``, and the rows it misses with the same date part alone or
    with its time to other precision (spreadsheets drop "00:00" and trailing seconds)."""
    times = read(text, utc, time_format)
    for variant in variants(time_format):
        if not times.isna().any():
            break
        times = times.where(times.notna(), read(text, utc, variant))
    return times


def variants(time_format: str) -> list[str]:
    date = time_format.split(" ")[0]
    found = [date] if date != time_format else []
    for short, long in (("%H:%M", "%H:%M:%S"), ("%H:%M:%S", "%H:%M:%S.%f")):
        if time_format.endswith(short) and not time_format.endswith(long):
            found.append(f"{time_format[: -len(short)]}{long}")
    if time_format.endswith("%H:%M:%S"):
        found.append(time_format.removesuffix(":%S"))
    if time_format.endswith("%H:%M:%S.%f"):
        found.append(time_format.removesuffix(".%f"))
    return found


def read(text: pd.Series, utc: bool, time_format: str) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(text, errors="coerce", utc=utc, format=time_format))


def check_format(time_format: str) -> str:
    """``time_format`` if pandas takes it as a format; ValueError naming it (a bad directive such
    as %Q would otherwise surface as a traceback from the first file read)."""
    try:
        pd.to_datetime(pd.Series(["2000-01-01"]), format=time_format, errors="coerce")
    except ValueError as exc:
        raise ValueError(f"{time_format!r} is not a date format pandas reads ({exc})") from None
    return time_format
