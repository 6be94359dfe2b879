"""One format for a whole time column.

pandas' ``format="mixed"`` guesses each value's format on its own, so "01/02/2000" (read month
first, January 2) and "13/02/2000" (which only parses day first, February 13) land in one column
read two ways, and a day-first monthly file comes out as scattered days: a gap check then asks for
thousands of missing steps, or a fill policy invents them. Here a column is read with one format:
ISO 8601 when it starts with a year (never day first), or the format of its first readable value.
Where that value reads both ways ("01/02/2000"), the whole column decides: the order under which
every value parses wins, and a column that parses both ways is refused unless ``data.time_format``
says which it is.
"""

from __future__ import annotations

import re
import warnings

import pandas as pd
from pandas.tseries.api import guess_datetime_format

from forecaster.errors import DataError

ISO_START = re.compile(r"^\d{4}-\d{1,2}")  # a year first: ISO 8601, whose order is fixed
SAMPLE = 100  # leading values looked at for one whose format can be guessed


def guessed(value: str, dayfirst: bool) -> str | None:
    with warnings.catch_warnings():  # pandas warns when a value only reads the other way round
        warnings.simplefilter("ignore")
        return guess_datetime_format(value, dayfirst=dayfirst)


def first_formats(text: pd.Series) -> tuple[str, ...]:
    """The formats the column's first guessable value reads with: ("ISO8601",), one format, two
    (month first, day first) when it reads both ways, or none (unix times, say)."""
    for value in text.iloc[:SAMPLE]:
        if ISO_START.match(value):
            return ("ISO8601",)
        month_first, day_first = guessed(value, dayfirst=False), guessed(value, dayfirst=True)
        if month_first and day_first and month_first != day_first:
            return month_first, day_first
        if month_first or day_first:
            return (month_first or day_first,)
    return ()


def parse_column(text: pd.Series, utc: bool, time_format: str | None = None) -> pd.DatetimeIndex:
    """Timestamps of a text column (NaT where a value does not parse), one format for all of them:
    ``time_format`` when given, else as the module docstring says. DataError when the column reads
    both day first and month first and nothing says which."""
    if time_format is not None:
        return read(text, utc, time_format)
    formats = first_formats(text)
    if not formats:
        return read(text, utc, "mixed")  # nothing to guess from: pandas' per-value parser
    if len(formats) == 1:
        return read(text, utc, formats[0])
    readings = [read(text, utc, fmt) for fmt in formats]
    unread = [int(reading.isna().sum()) for reading in readings]
    if unread[0] == unread[1] == 0 and not readings[0].equals(readings[1]):
        example = next(v for v, a, b in zip(text, *readings, strict=True) if a != b)
        raise DataError(
            f"timestamps like {example!r} read both month first ({formats[0]}) and day first "
            f"({formats[1]}) in every row; set data.time_format to the one meant, e.g. "
            f"--set data.time_format={formats[1]}"
        )
    return readings[0] if unread[0] <= unread[1] else readings[1]


def read(text: pd.Series, utc: bool, time_format: str) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(text, errors="coerce", utc=utc, format=time_format))
