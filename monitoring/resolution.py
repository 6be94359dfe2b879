"""Resolution: a logged forecast step meets the actual of its series and target time, and becomes
a row of ``resolved_steps`` (the actual beside the forecast, the baselines and the interval).

It happens once, when the second of the two arrives: POST /v1/actuals resolves the logged
forecasts its values fall into, and the log's writer resolves a batch of new forecasts whose
targets already have actuals (a backfill, a replay). The monitor then reads the newest N rows
of each version through an index, whatever the size of the log.

Why rows and not running sums: the window is the last N resolved steps of a version, so the
monitor must know which step leaves it when a new one comes in, and a correction replaces an
actual that sums would have to subtract. A row per resolved step answers both, exactly, and the
figures are computed from it by the same functions `forecast evaluate` uses.

Both paths run in one transaction with their write. On PostgreSQL, where two replicas may write
at once, each first takes a transaction-scoped advisory lock per series: an actual committed
while a forecast of its series was being written is then seen by one of the two, never by
neither. SQLite writes one transaction at a time, and each path's first statement is a write."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np
import pandas as pd
from sqlalchemy import Connection, select

from monitoring.bulk import upsert_many
from monitoring.records import expand_steps, records_frame, sql_times
from monitoring.schema import RESOLVED_VALUES, actuals, forecasts, resolved_steps
from monitoring.versions import version_ids

SERIES_LOCKS = 0x52534C56  # the advisory locks' first key ("RSLV"); the second is the series' hash
IN_LIST = 500  # series per IN (...) list
FORECAST_READ = (
    "id", "series_id", "role", "model_name", "model_version", "model_alias", "origin", "horizon", "level",
    "scale", "target_times", "forecast", "lower", "upper", "naive", "seasonal_naive",
)  # fmt: skip
RESOLVED_COLUMNS = ("forecast_id", "step", "version_id", "series_id", "origin", "target_time",
                    *RESOLVED_VALUES, "resolved_at")  # fmt: skip


def lock_series(connection: Connection, series_ids: Iterable[str]) -> None:
    """PostgreSQL: hold every given series until the transaction ends (keys taken in sorted
    order, so two transactions cannot wait on each other). Nothing to do on SQLite."""
    if connection.dialect.name != "postgresql":
        return
    keys = sorted({zlib.crc32(series_id.encode()) - 2**31 for series_id in series_ids})
    if keys:
        connection.exec_driver_sql(
            f"SELECT pg_advisory_xact_lock({SERIES_LOCKS}, k) FROM (SELECT unnest(%(keys)s::int4[]) AS k "
            "ORDER BY k) AS ordered",
            {"keys": keys},
        )


def chunks(items: list[str], size: int = IN_LIST) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def resolve(connection: Connection, logged: pd.DataFrame, known: pd.DataFrame, at: datetime) -> int:
    """Store the steps of ``logged`` (forecast rows, FORECAST_READ) that ``known`` (series_id,
    target_time as datetime64[us], actual) resolves, or update their actual (a correction).
    Returns how many steps that is."""
    if logged.empty or known.empty:
        return 0
    steps = expand_steps(logged).merge(known, on=["series_id", "target_time"])
    if steps.empty:
        return 0
    ids = version_ids(connection, steps[["role", "model_name", "model_version", "model_alias"]])
    keys = zip(steps["role"], steps["model_name"], steps["model_version"], strict=True)
    steps["version_id"] = [ids[key] for key in keys]
    dialect = connection.dialect.name
    columns = {
        "forecast_id": steps["id"].to_numpy(np.int64).tolist(),
        "step": steps["step"].to_numpy(np.int64).tolist(),
        "version_id": steps["version_id"].tolist(),
        "series_id": steps["series_id"].tolist(),
        "origin": sql_times(steps["origin"].to_numpy("datetime64[us]"), dialect),
        "target_time": sql_times(steps["target_time"].to_numpy("datetime64[us]"), dialect),
        **{name: steps[name].to_numpy(np.float64).tolist() for name in RESOLVED_VALUES},
        "resolved_at": sql_times(np.full(len(steps), np.datetime64(at, "us")), dialect),
    }
    rows = list(zip(*(columns[name] for name in RESOLVED_COLUMNS), strict=True))
    upsert_many(
        connection, resolved_steps, RESOLVED_COLUMNS, rows, ("forecast_id", "step"), ("actual", "resolved_at")
    )
    return len(rows)


def forecasts_overlapping(
    connection: Connection,
    series_ids: list[str],
    first: datetime,
    last: datetime,
    request_ids: Sequence[str] = (),
) -> pd.DataFrame:
    """The logged forecasts of these series with a step in [first, last] (narrowed to
    ``request_ids`` when given), through the (series_id, last_target) index."""
    f = forecasts
    frames = []
    for some in chunks(series_ids):
        query = select(*(f.c[name] for name in FORECAST_READ)).where(
            f.c.series_id.in_(some), f.c.last_target >= first, f.c.origin < last
        )
        if request_ids:
            query = query.where(f.c.request_id.in_(request_ids))
        frames.append(records_frame(connection.execute(query).all(), list(FORECAST_READ)))
    return pd.concat(frames, ignore_index=True) if frames else records_frame([], list(FORECAST_READ))


def actuals_within(
    connection: Connection, series_ids: list[str], first: datetime, last: datetime
) -> pd.DataFrame:
    """The stored actuals of these series in (first, last], as resolve's ``known``."""
    a = actuals
    rows: list = []
    for some in chunks(series_ids):
        rows += connection.execute(
            select(a.c.series_id, a.c.time, a.c.value).where(
                a.c.series_id.in_(some), a.c.time > first, a.c.time <= last
            )
        ).all()
    return known_frame(rows)


def known_frame(rows: Sequence) -> pd.DataFrame:
    known = records_frame(rows, ["series_id", "target_time", "actual"])
    known["target_time"] = known["target_time"].to_numpy(dtype="datetime64[us]")
    known["actual"] = known["actual"].astype(float)
    return known


def resolve_new_forecasts(connection: Connection, rows: list[tuple], at: datetime) -> int:
    """The writer's side: forecast rows just inserted (tuples in FORECAST_COLUMNS order, from
    records.batch_rows) whose steps already have actuals. Usually none do, and it costs one
    indexed query per batch."""
    if not rows:
        return 0
    series_ids = sorted({row[1] for row in rows})
    origins = [as_datetime(row[6]) for row in rows]
    lasts = [as_datetime(row[7]) for row in rows]
    known = actuals_within(connection, series_ids, min(origins), max(lasts))
    if known.empty:
        return 0
    first, last = known["target_time"].min().to_pydatetime(), known["target_time"].max().to_pydatetime()
    request_ids = sorted({row[0] for row in rows})
    logged = forecasts_overlapping(connection, sorted(set(known["series_id"])), first, last, request_ids)
    return resolve(connection, logged, known, at)


def resolve_new_actuals(connection: Connection, known: pd.DataFrame, at: datetime) -> int:
    """The actuals' side: every logged forecast step the given actuals (series_id, target_time,
    actual) resolve, those resolved before included (their actual is updated)."""
    if known.empty:
        return 0
    total = 0
    # the series in order of their first value, IN_LIST at a time: one query per list, over the
    # list's whole span (the join on series and time keeps what each series' values resolve).
    # A query per series cost ~9 ms each inside the write transaction, holding SQLite's lock
    spans = known.groupby("series_id", sort=False)["target_time"].agg(["min", "max"]).sort_values("min")
    for start in range(0, len(spans), IN_LIST):
        some = spans.iloc[start : start + IN_LIST]
        first, last = pd.Timestamp(some["min"].min()), pd.Timestamp(some["max"].max())
        series_ids = some.index.tolist()
        logged = forecasts_overlapping(connection, series_ids, first.to_pydatetime(), last.to_pydatetime())
        total += resolve(connection, logged, known[known["series_id"].isin(series_ids)], at)
    return total


def backfill(connection: Connection, at: datetime) -> int:
    """Resolve a whole log, a series at a time (a migration: logs written before resolved_steps)."""
    total = 0
    series_ids = connection.execute(select(actuals.c.series_id).distinct()).scalars().all()
    for series_id in series_ids:
        rows = connection.execute(
            select(actuals.c.series_id, actuals.c.time, actuals.c.value).where(
                actuals.c.series_id == series_id
            )
        ).all()
        known = known_frame(rows)
        first = known["target_time"].min().to_pydatetime()
        last = known["target_time"].max().to_pydatetime()
        logged = forecasts_overlapping(connection, [series_id], first, last)
        total += resolve(connection, logged, known, at)
    return total


def as_datetime(value: object) -> datetime:
    """A row's time as batch_rows made it (SQLite: the stored text; PostgreSQL: a datetime)."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value  # type: ignore[return-value]
