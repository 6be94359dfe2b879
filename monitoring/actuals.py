"""Actuals: the observed values, stored all or nothing and resolved against the logged forecasts
in the same transaction. Upserts keyed by (series, time): a value sent twice is stored once, a new
value for a stored time replaces it (a correction), and the resolved steps it falls on with it.

Before anything is written, each value's time is checked (monitoring/grid.py): off the series'
grid (13:00 of a daily series) it is refused, since `forecast retrain` could never read it back;
more than one horizon past the series' latest forecast step (years ahead) it is refused, since it
would open a gap in retrain's data. Anywhere else on the grid it is taken, a forecast reaching it
or not: retrain's data is the series, not only the times someone forecast. Values inside the
model's training data are stored too (they score nothing) and retrain leaves them out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Connection, and_, func, select

from monitoring.bulk import upsert_many
from monitoring.database import LogDatabase
from monitoring.grid import Grid
from monitoring.records import sql_times, utc_now
from monitoring.resolution import chunks, lock_series, resolve_new_actuals
from monitoring.retention import refresh_statistics
from monitoring.schema import actuals, forecasts

ACTUAL_COLUMNS = ("series_id", "time", "value", "received_at")
# a batch resolving this many steps refreshes PostgreSQL's statistics of them at once: a table
# growing faster than autovacuum looks at it is read by a bad plan until it does
# (monitoring/retention.py, refresh_statistics)
STATISTICS_AFTER = 10_000
NAMED = 20  # refused values a refusal names (the service's MAX_PROBLEMS); the rest are counted


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


@dataclass(frozen=True)
class Stray:
    """An actual refused for its time: where it was in ``ActualValues``, and why in words."""

    position: int
    series_id: str
    why: str
    kind: str  # off_grid (not a step of the series' grid) or beyond_forecasts (years ahead)


class StrayActuals(Exception):  # noqa: N818 (a refusal, named for what the caller sent)
    """Actuals refused for their time; nothing was stored. ``strays``: the first few, in the
    order given; ``total``: how many were refused in all."""

    def __init__(self, strays: list[Stray], total: int) -> None:
        super().__init__(strays, total)  # as its arguments: it pickles (it crosses processes)
        self.strays = strays
        self.total = total

    def __str__(self) -> str:
        return "; ".join(stray.why for stray in self.strays[:3])


@dataclass
class Reach:
    """What the log holds of each series a request names: its latest forecast step (NaT: none),
    anchoring the grid, and that forecast's horizon (0: none), bounding how far ahead it goes."""

    series_ids: list[str]
    latest: np.ndarray  # datetime64[us]
    horizon: np.ndarray  # int64

    def known(self) -> set[str]:
        return set(np.asarray(self.series_ids, dtype=object)[~np.isnat(self.latest)].tolist())


def store_actuals(
    database: LogDatabase,
    given: ActualValues,
    accept_unknown: bool = False,
    *,
    frequency: str,
    named: int = NAMED,
) -> StoredActuals:
    """Store ``given`` and resolve every logged forecast step it falls on, in one transaction.
    Unless ``accept_unknown``, actuals of a series the log has never forecast are refused (an
    actual of a mistyped id would sit there resolving nothing). Whatever it says, an actual off
    the series' grid at ``frequency`` (the served model's), or more than a horizon past its
    latest forecast, is refused (``refused``), naming the first ``named``. A refusal stores
    nothing: every check runs before the first write."""
    series_ids = sorted(set(given.series_id))
    now = utc_now()
    with database.begin() as connection:
        lock_series(connection, series_ids)
        reach = reach_of(connection, series_ids)
        if not accept_unknown:
            unknown = sorted(set(series_ids) - reach.known())
            if unknown:
                raise UnknownSeries(unknown)
        strays, total = refused(given, reach, Grid(frequency), named)
        if total:
            raise StrayActuals(strays, total)
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


def reach_of(connection: Connection, series_ids: list[str]) -> Reach:
    """Each series' latest forecast step and that forecast's horizon: one grouped query per
    IN_LIST series through the (series_id, last_target) index."""
    f = forecasts
    found: dict[str, tuple[object, int]] = {}
    for some in chunks(series_ids):
        newest = (
            select(f.c.series_id, func.max(f.c.last_target).label("latest"))
            .where(f.c.series_id.in_(some))
            .group_by(f.c.series_id)
            .subquery()
        )
        query = (
            select(newest.c.series_id, newest.c.latest, func.max(f.c.horizon))
            .join(f, and_(f.c.series_id == newest.c.series_id, f.c.last_target == newest.c.latest))
            .group_by(newest.c.series_id, newest.c.latest)
        )
        found.update({row[0]: (row[1], int(row[2])) for row in connection.execute(query)})
    latest = np.array([found.get(s, (None, 0))[0] for s in series_ids], dtype="datetime64[us]")
    horizon = np.array([found.get(s, (None, 0))[1] for s in series_ids], dtype=np.int64)
    return Reach(series_ids, latest, horizon)


def refused(given: ActualValues, reach: Reach, grid: Grid, named: int) -> tuple[list[Stray], int]:
    """The values to refuse (the first ``named`` of them, in the order given) and how many there
    are: off the grid anchored at their series' latest step, or past its reach. One vectorised
    pass over the request, whatever its number of series."""
    where = pd.Index(reach.series_ids).get_indexer(given.series_id)  # each value's series in reach
    anchors, times = reach.latest[where], given.time.astype("datetime64[us]")
    off = grid.off(times, anchors)
    limits = grid.limits(reach.latest, reach.horizon)[where]
    beyond = ~off & (times > limits)  # NaT limits (no forecast) compare False
    positions = np.flatnonzero(off | beyond)
    strays = [
        off_grid(given, k, anchors[k], grid) if off[k] else beyond_forecasts(given, k, anchors[k], limits[k])
        for k in positions[:named].tolist()
    ]
    return strays, len(positions)


def off_grid(given: ActualValues, k: int, anchor: np.datetime64, grid: Grid) -> Stray:
    series_id, time = given.series_id[k], given.time[k]
    before, after = grid.neighbours(time, anchor)
    through = "" if np.isnat(anchor) else f" through its forecast step {stamp(anchor)}"
    why = (
        f"{stamp(time)} is off the grid of series {series_id!r} ({grid.described()}{through}): its "
        f"nearest steps are {before.isoformat()} and {after.isoformat()}; send the value at the step "
        "it was observed for (off the grid it could not go into forecast retrain's data)"
    )
    return Stray(k, series_id, why, "off_grid")


def beyond_forecasts(given: ActualValues, k: int, latest: np.datetime64, limit: np.datetime64) -> Stray:
    series_id = given.series_id[k]
    why = (
        f"{stamp(given.time[k])} is past every forecast of series {series_id!r}: its latest logged "
        f"forecast step is {stamp(latest)}, and an actual more than one horizon after it (after "
        f"{stamp(limit)}) would leave a gap in forecast retrain's data up to it; post it once the "
        "series' forecasts come within a horizon of it"
    )
    return Stray(k, series_id, why, "beyond_forecasts")


def stamp(time: np.datetime64) -> str:
    return pd.Timestamp(time).isoformat()


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
