"""Many series in one long-format file (``id, time, target, ...``, as neuralforecast's
``unique_id, ds, y``): each series goes through the same strict rules as a single-series file,
and every error names the file, the series and the file's row.

Why the file is parsed whole: a panel of thousands of series parsed a series at a time spent its
time in pandas' per-call overhead (and hashed the file once per series). Timestamps and numbers
are parsed once for the whole table; each series is then checked on its own rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.clock import LOCAL
from forecaster.data.loading import (
    DuplicatePolicy,
    FillPolicy,
    LoadedSeries,
    _check_columns,
    _read_table,
    file_sha256,
    given_table,
    inferred_frequency,
    number_error,
    parse_numbers,
    parse_times,
    series_from_parsed,
    table_sha256,
    time_error,
)
from forecaster.errors import DataError


@dataclass
class LoadedPanel:
    """Series by id, in the order their ids sort; all share one frequency and the same columns.
    ``skipped``: series left out and why (only when loading was asked to skip bad series)."""

    members: dict[str, LoadedSeries]
    id_column: str
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def first(self) -> LoadedSeries:
        return next(iter(self.members.values()))

    @property
    def frequency(self) -> str:
        return self.first.frequency


@dataclass
class ParsedTable:
    """A long-format table parsed once: per row, its series (``codes`` into ``keys``), timestamp
    and numbers, with the rows that did not parse."""

    raw: pd.DataFrame
    keys: list[str]
    codes: np.ndarray  # (rows,)
    times: pd.DatetimeIndex  # (rows,) NaT where unparseable
    bad_times: np.ndarray  # row positions
    values: dict[str, np.ndarray]  # column -> (rows,) NaN where blank or unparseable
    bad_values: dict[str, np.ndarray]  # column -> row positions
    clock: str = LOCAL  # forecaster.data.clock: what the timestamps' wall times are
    time_format: str | None = None  # the day-month order read in, for a model to keep
    given_format: str | None = None  # data.time_format, when set: named in the error of a row

    def rows_by_series(self) -> dict[str, np.ndarray]:
        """Each series' row positions, in file order."""
        order = np.argsort(self.codes, kind="stable")
        bounds = np.searchsorted(self.codes[order], np.arange(len(self.keys) + 1))
        return {key: order[bounds[k] : bounds[k + 1]] for k, key in enumerate(self.keys)}


def parse_table(
    raw: pd.DataFrame,
    path: Path,
    id_column: str,
    time_column: str,
    columns: list[str],
    timezone: str | None = None,
    time_format: str | None = None,
) -> ParsedTable:
    ids = raw[id_column].astype(str).str.strip()
    blank = ids.eq("") | raw[id_column].isna()
    if blank.any():
        first = int(blank.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: column {id_column!r}, row {first + 1}: the series id is empty")
    codes, keys = pd.factorize(ids, sort=True)
    where = f"{path}: column {time_column!r}"
    parsed = parse_times(raw[time_column], timezone, time_format, where, series=codes)
    values, bad_values = {}, {}
    for column in columns:
        values[column], bad_values[column] = parse_numbers(raw[column])
    return ParsedTable(
        raw, [str(k) for k in keys], codes, parsed.times, parsed.bad, values, bad_values, parsed.clock,
        parsed.time_format, time_format,
    )  # fmt: skip


def load_panel(
    path: str | Path,
    id_column: str,
    time_column: str,
    target: str,
    covariates: list[str] | tuple[str, ...] = (),
    frequency: str | None = None,
    fill: FillPolicy | None = None,
    duplicates: DuplicatePolicy | None = None,
    future_covariates: list[str] | tuple[str, ...] = (),
    series: list[str] | None = None,
    skip_bad_series: bool = False,
    timezone: str | None = None,
    table: pd.DataFrame | None = None,
    time_format: str | None = None,
    model_frequency: str | None = None,
    model_frequency_given: bool = False,
) -> LoadedPanel:
    """Load every series of a long-format file (or those named in ``series``); one frequency for
    all: given, or inferred from the longest series and then required of every other. With
    ``skip_bad_series`` a series that breaks a rule is left out (named, with why, in ``skipped``)
    instead of stopping the load: batch forecasting forecasts the others. ``table``: the rows
    themselves (a DataFrame) instead of the file at ``path``, as ``load_series`` reads them.
    ``model_frequency``: a trained model's, required of every series (one at another frequency is
    an error, or with ``skip_bad_series`` left out; on its grid only where
    ``model_frequency_given``: forecaster.data.loading.check_model_frequency)."""
    path = Path(path)
    raw = _read_table(path) if table is None else given_table(table, time_column)
    past = [c for c in covariates if c != target]
    columns = [target, *past, *future_covariates]
    _check_columns(raw, path, [id_column, time_column, *columns])
    table = parse_table(raw, path, id_column, time_column, columns, timezone, time_format)
    groups = table.rows_by_series()
    if series is not None:
        unknown = [s for s in series if s not in groups]
        if unknown:
            raise DataError(
                f"{path}: series {unknown} not in column {id_column!r}; it holds {sorted(groups)}"
            )
        groups = {key: groups[key] for key in series}
    if not groups:
        raise DataError(f"{path}: no rows")
    sha256 = file_sha256(path) if table is None else table_sha256(raw)
    checks = SeriesChecks(
        table, path, time_column, target, past, list(future_covariates), fill, duplicates, sha256,
        model_frequency, model_frequency_given,
    )  # fmt: skip
    skipped: dict[str, str] = {}
    frequency = model_frequency or frequency
    if frequency is None:
        frequency = checks.shared_frequency(groups, skipped if skip_bad_series else None)
    members = {}
    for key, rows in groups.items():
        if key in skipped:
            continue
        try:
            members[key] = checks.series(key, rows, frequency)
        except DataError as exc:
            if not skip_bad_series:
                raise
            skipped[key] = str(exc)
    if not members:
        first = next(iter(skipped.items()))
        raise DataError(f"{path}: no series could be loaded ({len(skipped)} left out; the first: {first[1]})")
    return LoadedPanel(members, id_column, dict(sorted(skipped.items())))


@dataclass
class SeriesChecks:
    """One series of a parsed table through the single-series rules."""

    table: ParsedTable
    path: Path
    time_column: str
    target: str
    covariates: list[str]
    future_covariates: list[str]
    fill: FillPolicy | None
    duplicates: DuplicatePolicy | None
    sha256: str
    model_frequency: str | None = None  # a trained model's, which every series must be at
    model_frequency_given: bool = False  # set in its config: on its grid suffices

    def series(self, key: str, rows: np.ndarray, frequency: str | None) -> LoadedSeries:
        where = f"{self.path} (series {key!r})"
        self.check_parsed(rows, where)
        table = self.table
        return series_from_parsed(
            table.times[rows], {c: v[rows] for c, v in table.values.items()}, where, self.path,
            self.time_column, self.target, self.covariates, self.future_covariates, frequency, self.fill,
            self.duplicates, key, rows, self.sha256, table.clock, table.time_format, self.model_frequency,
            self.model_frequency_given,
        )  # fmt: skip

    def check_parsed(self, rows: np.ndarray, where: str) -> None:
        """The first row of these that did not parse, as the single-series loader names it."""
        table = self.table
        bad = np.intersect1d(rows, table.bad_times)
        if len(bad):
            raise time_error(table.raw[self.time_column], bad, where, self.time_column, table.given_format)
        for column, positions in table.bad_values.items():
            bad = np.intersect1d(rows, positions)
            if len(bad):
                raise number_error(table.raw[column], bad, where, column)

    def shared_frequency(self, groups: dict[str, np.ndarray], skipped: dict[str, str] | None) -> str:
        """The frequency of the longest series (skipping, when asked, those that do not load)."""
        for key in sorted(groups, key=lambda k: len(groups[k]), reverse=True):
            where = f"{self.path} (series {key!r})"
            try:
                self.check_parsed(groups[key], where)
                return inferred_frequency(pd.DatetimeIndex(self.table.times[groups[key]]), where)
            except DataError as exc:
                if skipped is None:
                    raise
                skipped[key] = str(exc)
        raise DataError(f"{self.path}: no series could be loaded (the first: {next(iter(skipped.values()))})")
