"""Actuals: the observed values, stored all or nothing and resolved against the logged forecasts
in the same transaction. Upserts keyed by (series, time): a value sent twice is stored once, a new
value for a stored time replaces it (a correction), and the resolved steps it falls on with it."""

from __future__ import annotations

from dataclasses import dataclass

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
        return pd.DataFrame({"series_id": self.series_id, "target_time": self.time, "actual": self.value})


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


def store_actuals(database: LogDatabase, given: ActualValues, accept_unknown: bool = False) -> StoredActuals:
    """Store ``given`` and resolve every logged forecast step it falls on, in one transaction.
    Unless ``accept_unknown``, actuals of a series the log has never forecast are refused (an
    actual of a mistyped id would sit there resolving nothing), and then nothing is stored."""
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
        resolved = resolve_new_actuals(connection, given.frame(), now)
    if resolved >= STATISTICS_AFTER:
        with database.begin() as connection:
            refresh_statistics(connection)
    return StoredActuals(len(rows), resolved)


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
