"""Strict loading of a time series from CSV or Parquet.

Every defect (missing column, bad timestamp, duplicate, unsorted row, non-number, NaN, gap) stops
the load with a message naming the file, column and first offending row or timestamp. Defects are
repaired only under an explicit policy, and each repair is reported.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd

from forecaster.data.clock import LOCAL, UTC_CLOCK, parse_on_clock
from forecaster.data.frequency import frequency_mismatch, infer_frequency, is_business_day
from forecaster.errors import DataError

FillPolicy = Literal["interpolate", "ffill"]
# what a gap's error asks for: a fill policy when training; a trained model's is its own
FILL_ADVICE = "choose a fill policy (interpolate, ffill)"
MODEL_FILL_ADVICE = (
    "this model was trained without a fill policy (data.fill): fill the gaps in the file, or train "
    "with data.fill (interpolate, ffill)"
)
# how errors and provenance name a table given in memory (the Python API's DataFrame), not a file
FRAME_SOURCE = "DataFrame"
DuplicatePolicy = Literal["first", "last", "mean"]


@dataclass
class LoadedSeries:
    """A clean, regular, sorted frame: index = timestamps, columns = [target, *covariates,
    *future_covariates]; ``series_id`` names it within a panel (long-format file)."""

    frame: pd.DataFrame
    target: str
    covariates: list[str]
    frequency: str
    source: str
    sha256: str
    repairs: list[str] = field(default_factory=list)
    future_covariates: list[str] = field(default_factory=list)
    series_id: str | None = None
    clock: str = LOCAL  # forecaster.data.clock: what its timestamps' wall times are
    # the day-month order its timestamps were read in, for a model to keep (time_formats.py)
    time_format: str | None = None

    @property
    def columns(self) -> list[str]:
        """What the network reads over the look-back (target first); future covariates apart."""
        return [self.target, *self.covariates]

    @property
    def label(self) -> str:
        """Where it came from, as error messages name it: the file, and the series in a panel."""
        return self.source if self.series_id is None else f"{self.source} (series {self.series_id!r})"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_series(
    path: str | Path,
    time_column: str,
    target: str,
    covariates: list[str] | tuple[str, ...] = (),
    frequency: str | None = None,
    fill: FillPolicy | None = None,
    duplicates: DuplicatePolicy | None = None,
    future_covariates: list[str] | tuple[str, ...] = (),
    timezone: str | None = None,
    table: pd.DataFrame | None = None,
    time_format: str | None = None,
    model_frequency: str | None = None,
    model_frequency_given: bool = False,
) -> LoadedSeries:
    """Load ``target`` (and ``covariates``, ``future_covariates``) indexed by ``time_column``;
    raise DataError on defects. ``timezone``: the wall clock timestamps are read on
    (forecaster.data.clock); ``time_format``: their format (forecaster.data.time_formats).
    ``table``: the rows themselves (a DataFrame), read by the same rules instead of the file at
    ``path``, which then only names them in errors. ``model_frequency``: the frequency of the
    trained model the data is for: data at another is refused, and the rest read at it;
    ``model_frequency_given``: whether the model's config set it (``check_model_frequency``)."""
    path = Path(path)
    raw = _read_table(path) if table is None else given_table(table, time_column)
    past = [c for c in covariates if c != target]
    _check_columns(raw, path, [time_column, target, *past, *future_covariates])
    return series_from_table(
        raw,
        str(path),
        path,
        time_column,
        target,
        past,
        list(future_covariates),
        frequency,
        fill,
        duplicates,
        sha256=None if table is None else table_sha256(raw),
        timezone=timezone,
        time_format=time_format,
        model_frequency=model_frequency,
        model_frequency_given=model_frequency_given,
    )


def given_table(table: pd.DataFrame, time_column: str) -> pd.DataFrame:
    """A DataFrame as if read from a file: the time column a column (pandas users often keep it
    as the index), rows numbered from 0 so that errors name them as a file's rows."""
    if time_column not in table.columns and table.index.name == time_column:
        table = table.reset_index()
    return table.reset_index(drop=True)


def table_sha256(table: pd.DataFrame) -> str:
    """A table's fingerprint, for the provenance a file's sha256 gives."""
    hashed = pd.util.hash_pandas_object(table, index=False).to_numpy()
    columns = ",".join(map(str, table.columns)).encode()
    return hashlib.sha256(columns + hashed.tobytes()).hexdigest()


def series_from_table(
    raw: pd.DataFrame,
    where: str,
    path: Path,
    time_column: str,
    target: str,
    covariates: list[str],
    future_covariates: list[str],
    frequency: str | None,
    fill: FillPolicy | None,
    duplicates: DuplicatePolicy | None,
    series_id: str | None = None,
    sha256: str | None = None,
    timezone: str | None = None,
    time_format: str | None = None,
    model_frequency: str | None = None,
    model_frequency_given: bool = False,
) -> LoadedSeries:
    """The strict rules on one series' rows of a table (``raw``'s index: the file's row positions,
    so errors name the file's rows); ``where`` starts each error (the file, and the series)."""
    columns = [target, *covariates, *future_covariates]
    parsed = _parse_times(raw[time_column], where, time_column, timezone, time_format)
    values = {c: _parse_numbers(raw[c], where, c).to_numpy() for c in columns}
    return series_from_parsed(
        parsed.times, values, where, path, time_column, target, covariates, future_covariates, frequency,
        fill, duplicates, series_id, raw.index.to_numpy(), sha256 or file_sha256(path), parsed.clock,
        parsed.time_format, model_frequency, model_frequency_given,
    )  # fmt: skip


def inferred_frequency(index: pd.DatetimeIndex, where: str) -> str:
    """The series' time step from its timestamps, or why a file this short cannot give one."""
    if len(index) < 3:
        raise DataError(
            f"{where}: {len(index)} row(s) of data; at least 3 timestamps are needed to infer the time "
            "step (data.frequency sets it)"
        )
    return infer_frequency(index)


def series_from_parsed(
    times: pd.DatetimeIndex,
    values: dict[str, np.ndarray],
    where: str,
    path: Path,
    time_column: str,
    target: str,
    covariates: list[str],
    future_covariates: list[str],
    frequency: str | None,
    fill: FillPolicy | None,
    duplicates: DuplicatePolicy | None,
    series_id: str | None,
    rows: np.ndarray,
    sha256: str,
    clock: str = LOCAL,
    time_format: str | None = None,
    model_frequency: str | None = None,
    model_frequency_given: bool = False,
) -> LoadedSeries:
    """The rules after parsing (sorted, duplicates, the frequency's grid, missing values) on one
    series' parsed timestamps and columns; ``rows`` are their rows in the file, for the errors. A
    long-format file is parsed once, whole, and each series checked here on its own rows.
    ``model_frequency``: a trained model's; the series must be at it (``check_model_frequency``,
    on its grid only where ``model_frequency_given``)."""
    frame = pd.DataFrame(values, index=pd.DatetimeIndex(times, name=time_column))
    _check_sorted(frame.index, where, time_column, rows)
    repairs: list[str] = []
    frame = _resolve_duplicates(frame, where, time_column, duplicates, repairs, rows)
    advice = FILL_ADVICE
    if model_frequency is not None:
        check_model_frequency(frame.index, where, time_column, model_frequency, model_frequency_given)
        frequency, advice = model_frequency, MODEL_FILL_ADVICE
    freq = frequency or inferred_frequency(frame.index, where)
    frame = _regularise(frame, where, time_column, freq, fill, repairs, clock, advice)
    _check_nans(frame, where, fill, repairs, advice)
    if fill is not None:
        frame = _fill(frame, fill)
    return LoadedSeries(
        frame=frame.astype(np.float64),
        target=target,
        covariates=covariates,
        frequency=freq,
        source=str(path),
        sha256=sha256,
        repairs=repairs,
        future_covariates=future_covariates,
        series_id=series_id,
        clock=clock,
        time_format=time_format,
    )


def check_model_frequency(
    index: pd.DatetimeIndex, where: str, time_column: str, freq: str, given: bool = False
) -> None:
    """Data for a trained model must be at its frequency: hourly readings given to a daily model
    would be read, and forecast, as days. Gaps are left to the model's fill policy. ``given``: the
    model's config set ``freq`` (data.frequency), so data on its grid passes however sparse (its
    training file may have been: weekdays only for a daily model) and the fill policy upsamples
    it, as in training (forecaster.data.frequency.frequency_mismatch)."""
    mismatch = frequency_mismatch(index, freq, given)
    if mismatch:
        raise DataError(
            f"{where}: column {time_column!r}: {mismatch}; give data at the model's frequency, or "
            "train a model on this data"
        )


def _read_table(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        if path.suffix.lower() in {".parquet", ".pq"}:
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:  # pandas raises many types; the user needs the file and the reason
        raise DataError(f"{path}: cannot be read as a table ({exc})") from None


def _check_columns(raw: pd.DataFrame, path: Path, needed: list[str]) -> None:
    check_columns(list(raw.columns), path, needed)


def check_columns(columns: list[str], path: Path, needed: list[str]) -> None:
    """Every ``needed`` column is among ``columns`` (the file's), or one error naming them all."""
    missing = [c for c in needed if c not in columns]
    if missing:
        available = ", ".join(map(str, columns))
        raise DataError(f"{path}: column(s) {missing} not found; available columns: {available}")


def _row(position: int, rows: np.ndarray | None = None) -> str:
    """Human row number: 1 is the first data row (line 2 of a CSV with a header); ``rows`` maps
    positions within one series of a long-format file to the file's rows."""
    return f"row {(position if rows is None else int(rows[position])) + 1}"


class ParsedTimes(NamedTuple):
    times: pd.DatetimeIndex  # naive wall times on ``clock``, NaT where a value does not parse
    bad: np.ndarray  # the positions that do not parse
    clock: str  # forecaster.data.clock
    time_format: str | None  # the day-month order a model keeps (time_formats.order_to_keep)


def parse_times(
    column: pd.Series,
    timezone: str | None = None,
    time_format: str | None = None,
    where: str = "",
    series: np.ndarray | None = None,
) -> ParsedTimes:
    """Timestamps (naive wall times on one clock for the whole series), the positions that do not
    parse, that clock (forecaster.data.clock: zone-aware stamps in UTC or in ``timezone``) and the
    format to keep. ``where`` names the file and column in the error of a column no one format
    reads; ``series``: each row's series code in a long-format file, whose dates start again at
    every series."""
    text = column.astype(str).str.strip()
    try:
        times, clock, kept = parse_on_clock(text, timezone, time_format, series)
    except DataError as exc:
        raise DataError(f"{where}: {exc}" if where else str(exc)) from None
    return ParsedTimes(times, np.flatnonzero(times.isna()), clock, kept)


def time_error(
    column: pd.Series, bad: np.ndarray, path: Path | str, name: str, given_format: str | None = None
) -> DataError:
    first = bad[0]
    given = "" if given_format is None else f" with data.time_format {given_format!r}"
    return DataError(
        f"{path}: column {name!r}, {_row(first, column.index)}: cannot parse timestamp "
        f"{shown(column.iloc[first])}{given}"
        f" ({len(bad)} unparseable in total)"
    )


def _parse_times(
    column: pd.Series, path: Path | str, name: str, timezone: str | None, time_format: str | None = None
) -> ParsedTimes:
    parsed = parse_times(column, timezone, time_format, f"{path}: column {name!r}")
    if len(parsed.bad):
        raise time_error(column, parsed.bad, path, name, time_format)
    return parsed


FLOAT32_MAX = float(np.finfo(np.float32).max)  # the networks compute in float32


def parse_numbers(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Numbers (NaN where blank) and the positions that are neither a number nor blank, or are a
    number no network can take: infinite, or beyond float32's range (which becomes infinite when
    the network reads it). Such a value would train a model whose every figure is NaN."""
    if pd.api.types.is_numeric_dtype(column):
        numbers = column.to_numpy(dtype=np.float64)
        return numbers, np.flatnonzero(~(np.abs(numbers) <= FLOAT32_MAX) & ~np.isnan(numbers))
    text = column.astype(str).str.strip()
    blank = text.isin(["", "nan", "NaN", "NA", "null", "None"])
    numbers = pd.to_numeric(text.where(~blank), errors="coerce").to_numpy(dtype=np.float64)
    unreadable = np.isnan(numbers) & ~blank.to_numpy()
    out_of_range = np.abs(numbers) > FLOAT32_MAX  # inf included; False for NaN
    return numbers, np.flatnonzero(unreadable | out_of_range)


def number_error(column: pd.Series, bad: np.ndarray, path: Path | str, name: str) -> DataError:
    first = bad[0]
    value = column.iloc[first]
    number = pd.to_numeric(pd.Series([str(value).strip()]), errors="coerce").iloc[0]
    what = "is not a number"
    if not np.isnan(number):  # it parses, but no network can take it
        what = f"is not a finite number within float32's range (+-{FLOAT32_MAX:.4g})"
    where = f"{path}: column {name!r}, {_row(first, column.index)}"
    return DataError(f"{where}: {shown(value)} {what} ({len(bad)} such value(s) in total)")


def shown(value: object) -> str:
    """A cell as its file holds it: ``inf`` and ``1700000000``, not numpy's ``np.float64(inf)``."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _parse_numbers(column: pd.Series, path: Path | str, name: str) -> pd.Series:
    numbers, bad = parse_numbers(column)
    if len(bad):
        raise number_error(column, bad, path, name)
    return pd.Series(numbers)


def _check_sorted(
    index: pd.DatetimeIndex, path: Path | str, name: str, rows: np.ndarray | None = None
) -> None:
    backwards = np.flatnonzero(index[1:] < index[:-1])
    if len(backwards):
        i = backwards[0] + 1
        raise DataError(
            f"{path}: column {name!r}, {_row(i, rows)}: timestamp {index[i]} comes before the previous "
            f"row's {index[i - 1]}; sort the file by time"
        )


def _resolve_duplicates(
    values: pd.DataFrame,
    path: Path | str,
    name: str,
    policy: DuplicatePolicy | None,
    repairs: list[str],
    rows: np.ndarray | None = None,
) -> pd.DataFrame:
    dupes = values.index.duplicated(keep=False)
    if not dupes.any():
        return values
    positions = np.flatnonzero(dupes)
    stamps = values.index[positions].unique()
    if policy is None:
        shown = ", ".join(_row(p, rows) for p in positions[:2])
        raise DataError(
            f"{path}: column {name!r}: duplicate timestamp {stamps[0]} ({shown}); "
            f"{len(stamps)} duplicated timestamp(s) in total; choose a duplicates policy "
            "(first, last, mean)"
        )
    grouped = values.groupby(level=0, sort=False)
    resolved = grouped.mean() if policy == "mean" else grouped.nth(0 if policy == "first" else -1)
    repairs.append(f"{len(stamps)} duplicated timestamp(s) resolved by {policy!r}: {stamps[0]}")
    return resolved


def _regularise(
    values: pd.DataFrame,
    path: Path | str,
    name: str,
    freq: str,
    fill: FillPolicy | None,
    repairs: list[str],
    clock: str = LOCAL,
    advice: str = FILL_ADVICE,
) -> pd.DataFrame:
    """Put the series on its frequency's grid; missing steps are an error unless a fill policy is
    given. Business-day series skip the check: a weekday without a row is a market holiday.
    ``clock``: the one the timestamps were read on, named in an off-grid error when it is UTC;
    ``advice``: what a gap's error says to do."""
    if is_business_day(freq) or evenly_spaced(values.index, freq):
        return values
    try:
        grid = pd.date_range(values.index[0], values.index[-1], freq=freq)
    except ValueError as exc:
        raise DataError(f"{path}: frequency {freq!r} is not valid ({exc})") from None
    off_grid = values.index.difference(grid)
    if len(off_grid):
        raise DataError(
            f"{path}: column {name!r}: timestamp {off_grid[0]} is off the {freq!r} grid "
            f"starting at {values.index[0]} ({len(off_grid)} in total){utc_hint(clock, freq)}"
        )
    missing = grid.difference(values.index)
    if len(missing) == 0:
        return values
    if fill is None:
        raise DataError(
            f"{path}: column {name!r}: {len(missing)} missing {freq!r} step(s), first at "
            f"{missing[0]}; {advice}"
        )
    repairs.append(f"{len(missing)} missing step(s) filled by {fill!r}, first at {missing[0]}")
    return values.reindex(grid).rename_axis(name)


def utc_hint(clock: str, freq: str) -> str:
    """Why daily stamps with a zone leave the grid: read in UTC, a local midnight moves by an hour
    with daylight saving. Said where it can be the cause (steps of a day or more)."""
    try:
        daily = pd.Timedelta(pd.tseries.frequencies.to_offset(freq)) >= pd.Timedelta(days=1)
    except ValueError:  # months, quarters, years
        daily = True
    if clock != UTC_CLOCK or not daily:
        return ""
    return (
        "; the timestamps were read in UTC, where a local midnight moves with daylight saving: "
        "data.timezone (their zone, e.g. Europe/Berlin) reads them as local dates"
    )


def evenly_spaced(index: pd.DatetimeIndex, freq: str) -> bool:
    """Every step exactly one fixed-length ``freq`` apart: on its grid with nothing missing (the
    usual case, answered without building the grid: a panel checks thousands of series)."""
    try:
        step = pd.Timedelta(pd.tseries.frequencies.to_offset(freq)).to_timedelta64()
    except (ValueError, TypeError):  # months, business days: no fixed length
        return False
    return len(index) < 2 or bool((np.diff(index.to_numpy()) == step).all())


def _check_nans(
    values: pd.DataFrame,
    path: Path | str,
    fill: FillPolicy | None,
    repairs: list[str],
    advice: str = FILL_ADVICE,
) -> None:
    if not np.isnan(values.to_numpy(dtype=np.float64)).any():
        return
    for column in values.columns:
        nan_at = np.flatnonzero(values[column].isna().to_numpy())
        if not len(nan_at):
            continue
        if fill is None:
            raise DataError(
                f"{path}: column {column!r}: missing value (NaN) at {values.index[nan_at[0]]} "
                f"({len(nan_at)} in total); {advice}"
            )
        if fill == "ffill" and nan_at[0] == 0:
            raise DataError(
                f"{path}: column {column!r}: the first value ({values.index[0]}) is missing and "
                "cannot be forward-filled; use interpolate or trim the file"
            )
        repairs.append(
            f"column {column!r}: {len(nan_at)} missing value(s) filled by {fill!r}, "
            f"first at {values.index[nan_at[0]]}"
        )


def _fill(values: pd.DataFrame, fill: FillPolicy) -> pd.DataFrame:
    if fill == "interpolate":
        return values.interpolate(method="time", limit_direction="both")
    return values.ffill()
