"""One format for a whole time column.

pandas' ``format="mixed"`` guesses each value's format on its own, so "01/02/2000" (read month
first, January 2) and "13/02/2000" (which only parses day first, February 13) land in one column
read two ways, and a day-first monthly file comes out as scattered days: a gap check then asks for
thousands of missing steps, or a fill policy invents them. Here the day-month order is decided
once for the whole column:

* a column that starts with a year (ISO 8601, "2024/01/02", "2024-01-01 00:00:00 UTC") is never
  read day first: ISO 8601 where it fits, pandas' per-value parser for what it does not;
* a numeric day and month ("01/02/24", "13.02.2024 1:00 pm") read both ways, by this module (pandas'
  guess has no two-digit years and takes "am" for text); any other value by pandas' guess;
* where the first readable value reads both ways ("01/02/2000"), the whole column decides: the
  order that puts the rows in time order (the loader refuses any other), then the one under which
  more of it parses (a later "13/02/2000" makes it day first). A column that reads as well both
  ways, differently, is refused until ``data.time_format`` says which it is. A row the format
  misses is read again in the same order with its date alone, with a time where the first row had
  none, or with other seconds ("01/02/2024" beside "01/02/2024 01:00");

and the format used is returned, so that training stores it with the model (a short file given
to `forecast predict` later may hold no day above 12 to decide by).
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format

from forecaster.errors import DataError

YEAR_FIRST = re.compile(r"^\d{4}[-/.]\d{1,2}")  # a year first: never day first
# a numeric day and month, either order, a year of 4 or 2 digits, maybe a time (12-hour too):
# read here rather than by pandas' guess, which has no two-digit years and takes "am" for text
NUMERIC_DATE = re.compile(
    r"^\d{1,2}(?P<sep>[-/.])\d{1,2}(?P=sep)(?P<year>\d{4}|\d{2})"
    r"(?:(?P<T>[ T])\d{1,2}:\d{2}(?P<seconds>:\d{2}(?P<fraction>\.\d+)?)?"
    r"(?P<space>\s*)(?P<ampm>[AaPp][Mm])?)?$"
)
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
        numeric = NUMERIC_DATE.match(value)
        if numeric:
            return numeric_formats(numeric)
        month_first, day_first = guessed(value, dayfirst=False), guessed(value, dayfirst=True)
        if month_first and day_first and month_first != day_first:
            return month_first, day_first
        if month_first or day_first:
            return (month_first or day_first,)
    return ()


def numeric_formats(found: re.Match[str]) -> tuple[str, str]:
    """(month first, day first) formats of a value NUMERIC_DATE matched."""
    sep, year = found["sep"], "%Y" if len(found["year"]) == 4 else "%y"
    time = ""
    if found["T"]:
        time = found["T"] + ("%I" if found["ampm"] else "%H") + ":%M"
        time += (":%S" if found["seconds"] else "") + (".%f" if found["fraction"] else "")
        time += (found["space"] + "%p") if found["ampm"] else ""
    return f"%m{sep}%d{sep}{year}{time}", f"%d{sep}%m{sep}{year}{time}"


def parse_column(
    text: pd.Series, utc: bool, time_format: str | None = None, series: np.ndarray | None = None
) -> Parsed:
    """Timestamps of a text column read with one day-month order (the module docstring says how),
    and the format that was; ``time_format`` when given. DataError when the column reads as well
    day first as month first, differently, and nothing says which."""
    formats = first_formats(text)
    if time_format is not None:
        times = with_variants(text, utc, time_format)
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
    in_order = [in_time_order(reading, series) for reading in readings]
    if in_order[0] != in_order[1]:  # the loader refuses an unsorted file: that order is not meant
        chosen = in_order.index(True)  # (its rows the other order misses are named, not guessed)
        return Parsed(readings[chosen], formats[chosen])
    read_rows = [int(reading.notna().sum()) for reading in readings]
    if read_rows[0] == read_rows[1]:
        both = readings[0].notna() & readings[1].notna()
        if readings[0].equals(readings[1]):  # every day is the month's number: nothing decided
            return Parsed(readings[0], None)
        if not readings[0][both].equals(readings[1][both]):
            example = text[both][readings[0][both] != readings[1][both]].iloc[0]
            raise DataError(
                f"timestamps like {example!r} read both month first ({formats[0]}) and day first "
                f"({formats[1]}); give the one meant as data.time_format: `forecast train --set "
                f"'data.time_format={formats[1]}'`, `forecast predict` or `evaluate --time-format "
                f"'{formats[1]}'`, or in a YAML file quoted, time_format: \"{formats[1]}\""
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


DATE_AND_TIME = re.compile(r"^(?P<date>.*?)(?P<sep>[ T])(?P<time>%[HI].*)$")  # "%d/%m/%Y" " " "%H:%M"
# the times a first row without one (a midnight whose "00:00" a spreadsheet dropped) lets in
TIMES = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M:%S %p", "%I:%M%p")


def variants(time_format: str) -> list[str]:
    """Formats of the same date part and order for the rows ``time_format`` misses: the date alone,
    any time where the format has none, and its time with seconds or fractions added or dropped."""
    parts = DATE_AND_TIME.match(time_format)
    if parts is None:  # no time: the other rows may have one
        return [f"{time_format} {time}" for time in TIMES]
    date, sep, time = parts["date"], parts["sep"], parts["time"]
    precisions = {
        time.replace(":%M", ":%M:%S", 1) if ":%S" not in time else time.replace(":%S", "", 1),
        time.replace(":%S", ":%S.%f", 1) if ".%f" not in time else time.replace(".%f", "", 1),
    }
    return [date, *(f"{date}{sep}{other}" for other in sorted(precisions) if other != time)]


def in_time_order(times: pd.DatetimeIndex, series: np.ndarray | None = None) -> bool:
    """Whether the rows read are in time order (ties allowed: duplicates have their own rule);
    within each series of a long-format file (``series``: each row's series code), whose dates
    start again at every series."""
    read_rows = times.notna()
    if series is None:
        return times[read_rows].is_monotonic_increasing
    rows = pd.DataFrame({"series": series[read_rows], "time": times[read_rows]})
    return bool((rows.groupby("series")["time"].diff().dropna() >= pd.Timedelta(0)).all())


def read(text: pd.Series, utc: bool, time_format: str) -> pd.DatetimeIndex:
    """``text`` read with ``time_format`` (NaT where a value does not fit it, or where the format
    cannot be compiled at all, as a variant built from another format may not be)."""
    try:
        return pd.DatetimeIndex(pd.to_datetime(text, errors="coerce", utc=utc, format=time_format))
    except (ValueError, re.error):
        return pd.DatetimeIndex([pd.NaT] * len(text), tz="UTC" if utc else None)


def check_format(time_format: str) -> str:
    """``time_format`` if pandas takes it as a format; ValueError naming it (a bad directive such
    as %Q would otherwise surface as a traceback from the first file read)."""
    try:
        pd.to_datetime(pd.Series(["2000-01-01"]), format=time_format, errors="coerce")
    except (ValueError, re.error) as exc:
        raise ValueError(f"{time_format!r} is not a date format pandas reads ({exc})") from None
    return time_format
