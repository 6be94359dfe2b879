"""Actuals: the observed values, stored all or nothing and resolved against the logged forecasts
in the same transaction. Upserts keyed by (series, time): a value sent twice is stored once, a new
value for a stored time replaces it (a correction), and the resolved steps it falls on with it.

An actual is taken for a time some logged forecast of its series has a step at: what it is for
is scoring that forecast. One between the steps of a forecast (13:00 of a daily series) is off
the series' grid, and would stop `forecast retrain` for good; one that no forecast reaches (a
date in the model's training history, or years ahead) would silently replace history or open a
gap in `forecast retrain`'s data. Both are refused, naming the series and time; the second is
stored all the same where unknown series are accepted (a backfill posted before its forecasts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, select

from monitoring.bulk import upsert_many
from monitoring.database import LogDatabase
from monitoring.records import sql_times, utc_now
from monitoring.resolution import chunks, lock_series, resolve_new_actuals
from monitoring.retention import refresh_statistics
from monitoring.schema import actuals, forecasts

ACTUAL_COLUMNS = ("series_id", "time", "value", "received_at")
# a batch resolving this many steps refreshes PostgreSQL's statistics of them at once: a table
# growing faster than autovacuum looks at it is read by a bad plan until it does
# (monitoring/retention.py, refresh_statistics)
STATISTICS_AFTER = 10_000


@dataclass
class ActualValues:
    """Observed values, one per (series, time), columnar: what a request's validation produces."""

    series_id: list[str]
    time: np.ndarray  # datetime64[us], wall times on the served model's clock (forecaster.data.clock)
    value: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.series_id)

    def frame(self) -> pd.DataFrame:
        """As resolution takes them, with each value's ``position`` here (to name a refused one)."""
        return pd.DataFrame(
            {
                "series_id": self.series_id,
                "target_time": self.time,
                "actual": self.value,
                "position": np.arange(len(self), dtype=np.int64),
            }
        )


@dataclass
class StoredActuals:
    stored: int
    resolved_steps: int


class UnknownSeries(Exception):  # noqa: N818 (a refusal, named for what the caller did)
    """Actuals of series the log holds no forecast of; nothing was stored."""

    def __init__(self, series_ids: list[str]) -> None:
        super().__init__(series_ids)  # as its only argument: it pickles (it crosses processes)
        self.series_ids = series_ids

    def __str__(self) -> str:
        return ", ".join(self.series_ids)


@dataclass(frozen=True)
class Stray:
    """An actual refused for its time: where it was in ``ActualValues``, and why in words."""

    position: int
    series_id: str
    why: str
    kind: str  # off_grid (between a forecast's steps) or not_forecast (no forecast reaches it)


class StrayActuals(Exception):  # noqa: N818 (a refusal, named for what the caller sent)
    """Actuals at times no logged forecast step of their series is at; nothing was stored."""

    def __init__(self, strays: list[Stray]) -> None:
        super().__init__(strays)  # as its only argument: it pickles (it crosses processes)
        self.strays = strays

    def __str__(self) -> str:
        return "; ".join(stray.why for stray in self.strays[:3])


def store_actuals(database: LogDatabase, given: ActualValues, accept_unknown: bool = False) -> StoredActuals:
    """Store ``given`` and resolve every logged forecast step it falls on, in one transaction.
    Unless ``accept_unknown``, actuals of a series the log has never forecast are refused (an
    actual of a mistyped id would sit there resolving nothing), and so are those at a time no
    logged forecast of their series has a step at; actuals between the steps of a forecast are
    refused always (off the series' grid). A refusal stores nothing."""
    series_ids = sorted(set(given.series_id))
    now = utc_now()
    with database.begin() as connection:
        lock_series(connection, series_ids)
        if not accept_unknown:
            unknown = sorted(set(series_ids) - forecast_series(connection, series_ids))
            if unknown:
                raise UnknownSeries(unknown)
        dialect = connection.dialect.name
        rows = list(
            zip(
                given.series_id,
                sql_times(given.time, dialect),
                given.value.tolist(),
                sql_times(np.full(len(given), np.datetime64(now, "us")), dialect),
                strict=True,
            )
        )
        upsert_many(
            connection, actuals, ACTUAL_COLUMNS, rows, ("series_id", "time"), ("value", "received_at")
        )
        unresolved: list[pd.DataFrame] = []
        resolved = resolve_new_actuals(connection, given.frame(), now, unresolved)
        refused = strays(unresolved, accept_unknown)
        if refused:
            raise StrayActuals(refused)  # before the transaction commits: nothing is stored
    if resolved >= STATISTICS_AFTER:
        with database.begin() as connection:
            refresh_statistics(connection)
    return StoredActuals(len(rows), resolved)


def strays(unresolved: list[pd.DataFrame], accept_unknown: bool) -> list[Stray]:
    """The actuals to refuse among those no logged step meets (resolution.unmet's rows), in the
    order they were given."""
    if not unresolved:
        return []
    rows = pd.concat(unresolved, ignore_index=True)
    if accept_unknown:
        rows = rows[rows["inside"].to_numpy(dtype=bool)]
    rows = rows.sort_values("position")
    return [stray_of(row) for row in rows.itertuples(index=False)]


def stray_of(row: Any) -> Stray:
    time = pd.Timestamp(row.target_time).isoformat()
    if row.inside:
        after = pd.Timestamp(row.after).isoformat()
        around = f"before its forecast step {after}"
        if not pd.isna(row.before):
            around = f"between its forecast steps {pd.Timestamp(row.before).isoformat()} and {after}"
        why = (
            f"{time} is off the grid of series {row.series_id!r}: it falls {around}, and forecast "
            "retrain could not place it; send the actual at a forecast step's timestamp"
        )
        return Stray(int(row.position), row.series_id, why, "off_grid")
    why = (
        f"no logged forecast of series {row.series_id!r} has a step at {time}: an actual scores the "
        "forecasts of its time, and one no forecast reaches (in the model's history, past the last "
        "forecast) would resolve nothing and go into forecast retrain's data, over the history it "
        "was trained on or across a gap; post it once a forecast covers it, or set "
        "ACTUALS_ACCEPT_UNKNOWN_SERIES=true to store it anyway"
    )
    return Stray(int(row.position), row.series_id, why, "not_forecast")


def forecast_series(connection: Connection, series_ids: list[str]) -> set[str]:
    """Which of these series the log holds a forecast of (through the series index)."""
    found: set[str] = set()
    for some in chunks(series_ids):
        found |= set(
            connection.execute(
                select(forecasts.c.series_id).where(forecasts.c.series_id.in_(some)).distinct()
            )
            .scalars()
            .all()
        )
    return found


def observed(connection: Connection, series_id: str) -> pd.Series:
    """Every stored actual of one series, by time (`forecast retrain` extends its data with them)."""
    rows = connection.execute(
        select(actuals.c.time, actuals.c.value)
        .where(actuals.c.series_id == series_id)
        .order_by(actuals.c.time)
    ).all()
    return pd.Series(
        [r.value for r in rows], index=pd.DatetimeIndex([r.time for r in rows]), dtype=float, name=series_id
    )
