"""Many series in one long-format file (``id, time, target, ...``, as neuralforecast's
``unique_id, ds, y``): each series goes through the same strict rules as a single-series file,
and every error names the file, the series and the file's row."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.data.frequency import infer_frequency
from forecaster.data.loading import (
    DuplicatePolicy,
    FillPolicy,
    LoadedSeries,
    _check_columns,
    _parse_times,
    _read_table,
    series_from_table,
)
from forecaster.errors import DataError


@dataclass
class LoadedPanel:
    """Series by id, in the order their ids sort; all share one frequency and the same columns."""

    members: dict[str, LoadedSeries]
    id_column: str

    @property
    def first(self) -> LoadedSeries:
        return next(iter(self.members.values()))

    @property
    def frequency(self) -> str:
        return self.first.frequency


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
) -> LoadedPanel:
    """Load every series of a long-format file (or those named in ``series``); one frequency for
    all: given, or inferred from the longest series and then required of every other."""
    path = Path(path)
    raw = _read_table(path)
    past = [c for c in covariates if c != target]
    _check_columns(raw, path, [id_column, time_column, target, *past, *future_covariates])
    ids = raw[id_column].astype(str).str.strip()
    blank = ids.eq("") | raw[id_column].isna()
    if blank.any():
        first = int(blank.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: column {id_column!r}, row {first + 1}: the series id is empty")
    groups = {key: rows for key, rows in raw.groupby(ids, sort=True)}
    if series is not None:
        unknown = [s for s in series if s not in groups]
        if unknown:
            raise DataError(
                f"{path}: series {unknown} not in column {id_column!r}; it holds {sorted(groups)}"
            )
        groups = {key: groups[key] for key in series}
    if not groups:
        raise DataError(f"{path}: no rows")
    if frequency is None:
        longest = max(groups, key=lambda key: len(groups[key]))
        where = f"{path} (series {longest!r})"
        frequency = infer_frequency(
            pd.DatetimeIndex(_parse_times(groups[longest][time_column], where, time_column))
        )
    members = {
        key: series_from_table(
            rows,
            f"{path} (series {key!r})",
            path,
            time_column,
            target,
            past,
            list(future_covariates),
            frequency,
            fill,
            duplicates,
            series_id=key,
        )
        for key, rows in groups.items()
    }
    return LoadedPanel(members, id_column)
