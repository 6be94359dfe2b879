"""Actuals: the observed values, stored all or nothing and resolved against the logged forecasts
in the same transaction. Upserts keyed by (series, time): a value sent twice is stored once, a new
value for a stored time replaces it (a correction), and the resolved steps it falls on with it.

Before anything is written, inside the write transaction, each value's time is checked
(monitoring/grid.py) against the served model's grid, anchored on its own latest forecast of the
series (else its name's, else any model's): off the grid (13:00 of a daily series) it is refused,
since `forecast retrain` could never read it back; later than now plus a step it is refused, as
not observed yet; more than one horizon past that forecast (years ahead) it is refused, since it
would open a gap in retrain's data. A value at a step some logged forecast of the series has
(another model's, another frequency's) is never refused as off the grid or past reach: it scores
that forecast (retrain leaves out what is off its own model's grid). Anywhere else on the grid it
is taken, a forecast reaching it or not: retrain's data is the series, not only the times someone
forecast. A series never forecast (taken with ACTUALS_ACCEPT_UNKNOWN_SERIES) is anchored on its
latest stored actual, else on its first value sent. Values inside the model's training data are
stored too (they score nothing) and retrain leaves them out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd
from sqlalchemy import Connection, and_, func, select

from monitoring.bulk import upsert_many
from monitoring.database import LogDatabase
from monitoring.grid import NOT_A_TIME, Grid
from monitoring.records import sql_times, step_values, utc_now
from monitoring.resolution import as_datetime, chunks, lock_series, resolve_new_actuals
from monitoring.retention import refresh_statistics
from monitoring.schema import STEP_ARRAYS, actuals, forecasts

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


@dataclass(frozen=True)
class Served:
    """The served model as actuals are checked against it, read once per request (the service
    reloads models under it): its frequency, its (name, version) as the log names it, and the
    time now on its clock."""

    frequency: str
    model: tuple[str, str] | None
    now: datetime | None


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
    kind: str  # off_grid (not a step of the series' grid), in_future, or beyond_forecasts (years ahead)


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
    """What the log holds of each series a request names. ``anchor``: a step of the series' grid
    that its values' phase is judged from (NaT: none); ``anchored_by`` says which kind of step it
    is, for the message that refuses a value. ``latest``: the latest step of the forecast the
    anchor was taken from (NaT: the log holds no forecast of the series) and ``horizon`` that
    forecast's horizon, bounding how far ahead a value may go."""

    series_ids: list[str]
    anchor: np.ndarray  # datetime64[us]
    anchored_by: np.ndarray  # object: "forecast step", "stored actual", "first value sent"
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
    model: tuple[str, str] | None = None,
    now: datetime | None = None,
    named: int = NAMED,
) -> StoredActuals:
    """Store ``given`` and resolve every logged forecast step it falls on, in one transaction.
    Unless ``accept_unknown``, actuals of a series the log has never forecast are refused (an
    actual of a mistyped id would sit there resolving nothing). Whatever it says, an actual off
    the series' grid at ``frequency`` (the served model's, ``model`` its (name, version): its
    forecasts anchor the grid), more than a horizon past that forecast, or later than ``now``
    (wall time on the model's clock; None: not checked) plus a step, is refused (``refused``),
    naming the first ``named``. A refusal stores nothing: every check runs before the first
    write, inside the write transaction (``hold_for_writing``)."""
    series_ids = sorted(set(given.series_id))
    written_at = utc_now()
    with database.begin() as connection:
        hold_for_writing(connection, series_ids)
        reach = reach_of(connection, series_ids, model)
        if not accept_unknown:
            unknown = sorted(set(series_ids) - reach.known())
            if unknown:
                raise UnknownSeries(unknown)
        anchor_unforecast(connection, reach, given)
        strays, total = refused(connection, given, reach, Grid(frequency), named, now)
        if total:
            raise StrayActuals(strays, total)
        dialect = connection.dialect.name
        rows = list(
            zip(
                given.series_id,
                sql_times(given.time, dialect),
                given.value.tolist(),
                sql_times(np.full(len(given), np.datetime64(written_at, "us")), dialect),
                strict=True,
            )
        )
        upsert_many(
            connection, actuals, ACTUAL_COLUMNS, rows, ("series_id", "time"), ("value", "received_at")
        )
        resolved = resolve_new_actuals(connection, given.frame(), written_at)
    if resolved >= STATISTICS_AFTER:
        with database.begin() as connection:
            refresh_statistics(connection)
    return StoredActuals(len(rows), resolved)


def hold_for_writing(connection: Connection, series_ids: list[str]) -> None:
    """Make the checks' reads part of the write transaction. PostgreSQL: lock the series (a
    forecast or actual of theirs written meanwhile by another replica waits). SQLite: pysqlite
    issues no BEGIN before a SELECT, so the reads would run outside any transaction and a
    forecast committed between them and the upsert would go unseen: BEGIN IMMEDIATE takes the
    write lock first (waiting the busy timeout, as the upsert would). Only this path does so:
    the writer's transactions begin with a write anyway."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    lock_series(connection, series_ids)


def reach_of(connection: Connection, series_ids: list[str], model: tuple[str, str] | None = None) -> Reach:
    """Each series' anchor: the latest logged forecast of ``model`` (name, version) for it, else
    of that model name (another version), else of any model. Why not simply the latest of any: a
    daily champion's steps at midnight and another version's hourly forecast ending at 23:00
    anchored the daily grid at 23:00, refusing the champion's own midnights. One grouped query
    per IN_LIST series through the (series_id, last_target) index; a second, by model, only for
    the series whose latest forecast is not ``model``'s."""
    newest = newest_forecasts(connection, series_ids, by_model=False)
    chosen = {series_id: pick(rows, model) for series_id, rows in newest.items()}
    others = sorted(s for s, (picked, exact) in chosen.items() if model is not None and not exact)
    if others:
        by_model = newest_forecasts(connection, others, by_model=True)
        chosen.update({s: pick(by_model[s], model) for s in others})
    latest = np.array([chosen[s][0][0] if s in chosen else None for s in series_ids], dtype="datetime64[us]")
    horizon = np.array([chosen[s][0][1] if s in chosen else 0 for s in series_ids], dtype=np.int64)
    by = np.where(np.isnat(latest), None, "forecast step").astype(object)
    return Reach(series_ids, latest.copy(), by, latest, horizon)


Newest = tuple[object, int]  # (last_target, horizon) of a forecast


def newest_forecasts(
    connection: Connection, series_ids: list[str], by_model: bool
) -> dict[str, list[tuple[str, str, Newest]]]:
    """Per series, (model name, version, (last_target, horizon)) of its newest forecasts: of all
    its models together (those at that last target), or ``by_model``, each model version's."""
    f = forecasts
    group = [f.c.series_id, f.c.model_name, f.c.model_version] if by_model else [f.c.series_id]
    found: dict[str, list[tuple[str, str, Newest]]] = {}
    for some in chunks(series_ids):
        newest = (
            select(*group, func.max(f.c.last_target).label("latest"))
            .where(f.c.series_id.in_(some))
            .group_by(*group)
            .subquery()
        )
        same = [f.c[c.name] == newest.c[c.name] for c in group]
        query = (
            select(
                newest.c.series_id, f.c.model_name, f.c.model_version, newest.c.latest, func.max(f.c.horizon)
            )
            .join(f, and_(*same, f.c.last_target == newest.c.latest))
            .group_by(newest.c.series_id, f.c.model_name, f.c.model_version, newest.c.latest)
        )
        for series_id, name, version, last, horizon in connection.execute(query):
            found.setdefault(series_id, []).append((name, version, (last, int(horizon))))
    return found


def pick(rows: list[tuple[str, str, Newest]], model: tuple[str, str] | None) -> tuple[Newest, bool]:
    """The forecast to anchor on among ``rows``: ``model``'s, else its name's newest, else the
    newest of all (the longest horizon among equals); and whether it is ``model``'s own."""
    exact = [newest for name, version, newest in rows if model == (name, version)]
    if exact:
        return max(exact, key=by_time), True
    named = [newest for name, _, newest in rows if model is not None and name == model[0]]
    return max(named or [newest for *_, newest in rows], key=by_time), False


def by_time(newest: Newest) -> tuple:
    return (as_datetime(newest[0]), newest[1])


def anchor_unforecast(connection: Connection, reach: Reach, given: ActualValues) -> None:
    """Anchors for the series the log holds no forecast of (taken with ACTUALS_ACCEPT_UNKNOWN_SERIES):
    the latest actual stored of it, else its first value in ``given``. Without one, a fixed-step
    frequency's phase went unchecked and 13:00 stood beside midnights, stopping `forecast
    retrain` of the series later; with one, every value of the series shares one phase."""
    missing = np.flatnonzero(np.isnat(reach.anchor))
    if not len(missing):
        return
    names = [reach.series_ids[k] for k in missing.tolist()]
    stored = latest_actuals_of(connection, names)
    first = pd.Series(given.time).groupby(np.asarray(given.series_id, dtype=object), sort=False).first()
    for k, name in zip(missing.tolist(), names, strict=True):
        if name in stored:
            reach.anchor[k], reach.anchored_by[k] = np.datetime64(stored[name], "us"), "stored actual"
        else:
            reach.anchor[k], reach.anchored_by[k] = np.datetime64(first[name], "us"), "first value sent"


def latest_actuals_of(connection: Connection, series_ids: list[str]) -> dict[str, datetime]:
    """Each series' latest stored actual's time, through the actuals' (series_id, time) key."""
    a = actuals
    found: dict[str, datetime] = {}
    for some in chunks(series_ids):
        query = (
            select(a.c.series_id, func.max(a.c.time)).where(a.c.series_id.in_(some)).group_by(a.c.series_id)
        )
        found.update({series_id: as_datetime(time) for series_id, time in connection.execute(query)})
    return found


def refused(
    connection: Connection,
    given: ActualValues,
    reach: Reach,
    grid: Grid,
    named: int,
    now: datetime | None = None,
) -> tuple[list[Stray], int]:
    """The values to refuse (the first ``named`` of them, in the order given) and how many there
    are: off the grid anchored at their series' anchor, later than ``now`` plus a step, or past
    its forecast's reach. A value at a logged forecast step of its series (any model's) is
    neither off the grid nor past reach: a forecast reached it, and it scores that forecast. One
    vectorised pass over the request, whatever its number of series."""
    where = pd.Index(reach.series_ids).get_indexer(given.series_id)  # each value's series in reach
    anchors, times = reach.anchor[where], given.time.astype("datetime64[us]")
    off = grid.off(times, anchors)
    soon = NOT_A_TIME if now is None else grid.limits(np.array([now], "datetime64[us]"), np.ones(1))[0]
    limits = grid.limits(reach.latest, reach.horizon)[where]
    beyond = ~off & (times > limits)  # NaT limits (no forecast) compare False
    suspects = np.flatnonzero(off | beyond)
    if len(suspects):
        forecast = suspects[at_logged_steps(connection, given, suspects)]
        off[forecast] = beyond[forecast] = False
    # after the exemption: a logged step excuses the grid and the reach, never the future
    future = ~off & (times > soon)  # NaT (no clock given) compares False
    beyond &= ~future
    positions = np.flatnonzero(off | future | beyond)
    strays = []
    for k in positions[:named].tolist():
        if off[k]:
            strays.append(off_grid(given, k, anchors[k], reach.anchored_by[where[k]], grid))
        elif future[k]:
            strays.append(in_future(given, k, now, soon))
        else:
            strays.append(beyond_forecasts(given, k, reach.latest[where[k]], limits[k]))
    return strays, len(positions)


def at_logged_steps(connection: Connection, given: ActualValues, positions: np.ndarray) -> np.ndarray:
    """Whether each value at ``positions`` falls on a step a logged forecast of its series has
    (any model, version or role): read only for the values the grid would refuse, through the
    (series_id, last_target) index, from the forecasts whose span can hold them."""
    series = np.asarray(given.series_id, dtype=object)[positions]
    times = given.time[positions].astype("datetime64[us]")
    first, last = pd.Timestamp(times.min()).to_pydatetime(), pd.Timestamp(times.max()).to_pydatetime()
    f = forecasts
    rows: list = []
    for some in chunks(sorted(set(series.tolist()))):
        query = select(f.c.series_id, f.c.horizon, f.c.target_times).where(
            f.c.series_id.in_(some), f.c.last_target >= first, f.c.origin < last
        )
        rows += connection.execute(query).all()
    if not rows:
        return np.zeros(len(positions), bool)
    horizons = np.array([row[1] for row in rows], dtype=np.int64)
    steps = step_values([row[2] for row in rows], horizons, STEP_ARRAYS["target_times"])
    logged = pd.MultiIndex.from_arrays(
        [np.repeat(np.array([row[0] for row in rows], dtype=object), horizons), steps.view("datetime64[us]")]
    )
    return pd.MultiIndex.from_arrays([series, times]).isin(logged)


def off_grid(
    given: ActualValues, k: int, anchor: np.datetime64, anchored_by: str | None, grid: Grid
) -> Stray:
    series_id, time = given.series_id[k], given.time[k]
    before, after = grid.neighbours(time, anchor)
    through = "" if np.isnat(anchor) else f" through its {anchored_by} {stamp(anchor)}"
    why = (
        f"{stamp(time)} is off the grid of series {series_id!r} ({grid.described()}{through}): its "
        f"nearest steps are {before.isoformat()} and {after.isoformat()}; send the value at the step "
        "it was observed for (off the grid it could not go into forecast retrain's data)"
    )
    return Stray(k, series_id, why, "off_grid")


def in_future(given: ActualValues, k: int, now: datetime | None, soon: np.datetime64) -> Stray:
    series_id = given.series_id[k]
    why = (
        f"{stamp(given.time[k])} of series {series_id!r} is in the future: it is now {stamp(now)} on "
        f"the model's clock, and a value may be at most one step ahead of it ({stamp(soon)}); post "
        "it once it has been observed"
    )
    return Stray(k, series_id, why, "in_future")


def beyond_forecasts(given: ActualValues, k: int, latest: np.datetime64, limit: np.datetime64) -> Stray:
    series_id = given.series_id[k]
    why = (
        f"{stamp(given.time[k])} is past every forecast of series {series_id!r}: its latest logged "
        f"forecast step is {stamp(latest)}, and an actual more than one horizon after it (after "
        f"{stamp(limit)}) would leave a gap in forecast retrain's data up to it; post it once the "
        "series' forecasts come within a horizon of it"
    )
    return Stray(k, series_id, why, "beyond_forecasts")


def stamp(time: object) -> str:
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
