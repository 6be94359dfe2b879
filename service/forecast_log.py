"""The forecast log: every answered forecast step and every actual, in a SQL database
(SQLAlchemy: an embedded SQLite file or PostgreSQL), so live error can be measured against the
naive forecasts of the very same windows (service/monitor.py).

Why off the request path: a prediction must never wait for, or fail because of, the log. The
predict handler only hands the arrays it already holds to ``ForecastLog.submit`` (a bounded
queue, ``put_nowait``); a writer thread turns them into rows (baselines included) and inserts them
in batches. A full queue drops the record, a failing database fails the batch: both are counted
(``forecast_log_records_total``) and shown in /readyz, and predictions keep flowing.

Actuals are written synchronously by POST /v1/actuals, in one transaction (all or nothing), as
upserts keyed by (series, timestamp): a value sent twice counts once, a correction replaces it.
They are joined to forecast steps when the monitor reads, so the order in which forecasts and
actuals arrive does not matter."""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    delete,
    event,
    func,
    inspect,
    make_url,
    select,
)
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from forecaster.baselines import baseline_forecasts
from forecaster.conformal import interval_quantiles
from forecaster.data.frequency import seasonal_period, step_of
from service.metrics import ServiceMetrics
from service.queue_worker import QueueWorker
from service.redaction import redact

log = logging.getLogger("service.forecast_log")

metadata = MetaData()

# One row per answered forecast of one series: which model made it, from the window ending at
# ``origin``, with that window's MASE scale. Its horizon steps are rows of ``forecast_steps``, the
# last one for ``last_target``: the index on (series_id, last_target) finds the forecasts an actual
# can resolve (those of its series not over before it) with one entry per forecast, not per step.
ID = BigInteger().with_variant(Integer, "sqlite")
forecasts = Table(
    "forecasts",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("request_id", String(32), nullable=False),
    Column("series_id", String(200), nullable=False),
    Column("role", String(16), nullable=False),  # champion (answered) or challenger (shadow)
    Column("model_name", String(200), nullable=False),
    Column("model_version", String(50), nullable=False),
    Column("model_alias", String(100), nullable=False),
    Column("origin", DateTime, nullable=False),  # the window's last timestamp
    Column("last_target", DateTime, nullable=False),  # its last step's timestamp
    Column("horizon", Integer, nullable=False),  # how many steps it has in forecast_steps
    Column("level", Float),  # the nominal level of its interval bounds, when it has them
    Column("scale", Float, nullable=False),  # the window's in-sample seasonal-naive MAE (MASE's scale)
    Column("logged_at", DateTime, nullable=False),  # wall clock (UTC): retention goes by this
    Index("ix_forecasts_series_last_target", "series_id", "last_target"),
)
# One row per horizon step: what was forecast for ``target_time``, beside the naive and
# seasonal-naive forecasts of the same window. Slim on purpose, it takes H rows per forecast: the
# forecast's own columns live once in ``forecasts`` (``forecast_id`` is its id; no foreign-key
# constraint, PostgreSQL would check it row by row). Keyed by (forecast_id, step) and, on SQLite,
# stored in that order (WITHOUT ROWID): ids only grow, so every insert appends to the one B-tree
# (an index on target_time, which takes steps in time order, cost SQLite's inserts 40% more CPU),
# and a forecast's steps, or all steps below an id, are one range of it.
forecast_steps = Table(
    "forecast_steps",
    metadata,
    Column("forecast_id", ID, primary_key=True, autoincrement=False),
    Column("step", Integer, primary_key=True, autoincrement=False),  # 1..H
    Column("target_time", DateTime, nullable=False),
    Column("forecast", Float, nullable=False),
    Column("lower", Float),  # the model's first interval level, when it has one
    Column("upper", Float),
    Column("naive", Float, nullable=False),
    Column("seasonal_naive", Float),  # when the look-back holds a whole season
    sqlite_with_rowid=False,
)
# Retention deletes forecasts by logged_at: PostgreSQL gets a BRIN index for it (rows arrive in
# that order, so block range summaries find them at next to no cost per insert). SQLite gets none
# (a B-tree index cost every insert a fifth more CPU): prune() bounds its deletes by id there.
Index("ix_forecasts_logged_brin", forecasts.c.logged_at, postgresql_using="brin").ddl_if(dialect="postgresql")

actuals = Table(
    "actuals",
    metadata,
    Column("series_id", String(200), primary_key=True),
    Column("time", DateTime, primary_key=True),
    Column("value", Float, nullable=False),
    Column("received_at", DateTime, nullable=False),
)


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def connect(url: str) -> Engine:
    """An engine for the log. SQLite gets WAL (the writer thread and readers do not block each
    other) and a busy timeout; PostgreSQL a short connect timeout, so an unreachable server fails
    a batch in seconds instead of hanging the writer."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 5, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _wal(connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    parsed = make_url(url)
    if parsed.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2; we ship psycopg 3
        parsed = parsed.set(drivername="postgresql+psycopg")
    connect_args = {"connect_timeout": 3} if parsed.drivername.startswith("postgresql") else {}
    return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)


_created: weakref.WeakSet[Engine] = weakref.WeakSet()  # not ids: a new engine may reuse a freed one's
_creating = threading.Lock()


def create_tables(engine: Engine) -> None:
    """The log's tables, created once per engine (the writer thread and the actuals route share
    it). Two processes creating them at once (``--workers``): the loser finds them on its retry."""
    if engine in _created:
        return
    with _creating:
        if engine in _created:
            return
        refuse_an_earlier_layout(engine)
        try:
            metadata.create_all(engine)
        except Exception:
            time.sleep(0.2)
            metadata.create_all(engine)  # checkfirst: the tables another process made are kept
        _created.add(engine)


def refuse_an_earlier_layout(engine: Engine) -> None:
    """A log written by an earlier version has tables of another layout (the first kept every
    column on each step row). Its rows cannot be read as forecasts of this layout, and quietly
    renaming or rewriting someone's table is worse than saying so."""
    inspector = inspect(engine)
    for table in (forecasts, forecast_steps):
        if not inspector.has_table(table.name):
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        missing = [column.name for column in table.columns if column.name not in present]
        key = [column.name for column in table.primary_key.columns]
        if not missing and inspector.get_pk_constraint(table.name)["constrained_columns"] != key:
            missing = [f"primary key ({', '.join(key)})"]
        if missing:
            raise RuntimeError(
                f"the forecast log {redact(str(engine.url))} was written by an earlier version of the "
                f"service (its {table.name} table has no {', '.join(missing)}): point FORECAST_LOG_URL "
                "at a new database, or move its forecasts and forecast_steps tables away"
            )


@dataclass
class ForecastRecord:
    """One answered request's forecasts, as the predict handler holds them (no copies, no rows:
    the writer thread does that)."""

    request_id: str
    role: str
    model_name: str
    model_version: str
    model_alias: str
    frequency: str
    series_ids: list[str]
    past_target: np.ndarray  # (n, L) the windows' target, raw units
    future_times: list[np.ndarray]  # n x (H,) datetime64
    mean: np.ndarray  # (n, H)
    quantiles: dict[float, np.ndarray]  # level -> (n, H)
    levels: list[float]  # the model's interval levels


FORECAST_COLUMNS = (
    "request_id", "series_id", "role", "model_name", "model_version", "model_alias", "origin", "last_target",
    "horizon", "level", "scale", "logged_at",
)  # fmt: skip
STEP_COLUMNS = ("forecast_id", "step", "target_time", "forecast", "lower", "upper", "naive", "seasonal_naive")


@dataclass
class StepColumns:
    """The step rows of forecasts of one shape, column by column, (steps,) each; ``owner`` is the
    position of each step's forecast in the batch (the database numbers the forecasts later)."""

    owner: np.ndarray
    step: np.ndarray
    target_time: np.ndarray  # datetime64[us]
    forecast: np.ndarray
    lower: np.ndarray | None  # None: the model has no interval
    upper: np.ndarray | None
    naive: np.ndarray
    seasonal_naive: np.ndarray | None  # None: the look-back holds no whole season

    def rows(self, ids: np.ndarray, dialect: str) -> list[tuple]:
        """Rows (STEP_COLUMNS) of Python values, given the ids the batch's forecasts got."""
        absent = [None] * len(self.owner)
        values = (
            ids[self.owner].tolist(),
            self.step.tolist(),
            sql_times(self.target_time, dialect),
            *(absent if column is None else column.tolist() for column in self.values()),
        )
        return list(zip(*values, strict=True))

    def values(self) -> tuple[np.ndarray | None, ...]:
        return self.forecast, self.lower, self.upper, self.naive, self.seasonal_naive

    def pg_binary(self, ids: np.ndarray) -> bytes:
        """The rows as PostgreSQL's binary COPY tuples, built by numpy in one pass: per row a
        field count, then per field its byte length (-1: NULL) and big-endian value."""
        columns = [(">i8", ids[self.owner]), (">i4", self.step), (">i8", pg_timestamps(self.target_time))]
        columns += [(">f8", column) for column in self.values()]
        layout: list[tuple[str, str]] = [("fields", ">i2")]
        for i, (kind, column) in enumerate(columns):
            layout.append((f"length{i}", ">i4"))
            if column is not None:
                layout.append((f"value{i}", kind))
        out = np.empty(len(self.owner), dtype=np.dtype(layout))
        out["fields"] = len(columns)
        for i, (kind, column) in enumerate(columns):
            out[f"length{i}"] = -1 if column is None else np.dtype(kind).itemsize
            if column is not None:
                out[f"value{i}"] = column
        return out.tobytes()


PG_EPOCH = np.datetime64("2000-01-01T00:00:00", "us")
PG_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # no flags, no header extension
PG_COPY_TRAILER = b"\xff\xff"


def pg_timestamps(times: np.ndarray) -> np.ndarray:
    """datetime64[us] -> PostgreSQL's binary timestamp: microseconds since 2000-01-01."""
    return (times.astype("datetime64[us]") - PG_EPOCH).astype(np.int64)


@dataclass
class Rows:
    """A batch's rows: a forecast per series (FORECAST_COLUMNS, no id yet) and their steps."""

    forecasts: list[tuple]
    steps: list[StepColumns]

    def step_rows(self, ids: np.ndarray, dialect: str) -> list[tuple]:
        if len(self.steps) == 1:  # the usual batch: one shape
            return self.steps[0].rows(ids, dialect)
        return [row for block in self.steps for row in block.rows(ids, dialect)]


@functools.lru_cache(maxsize=64)
def calendar_of(frequency: str) -> tuple[int, pd.DateOffset, np.timedelta64 | None]:
    """(seasonal period, step, the step as a fixed length when it has one) of a frequency: pandas
    parses the alias slowly, once is enough."""
    step = step_of(frequency)
    try:
        fixed = pd.Timedelta(step).to_timedelta64()
    except ValueError:  # months, business days: no fixed length
        fixed = None
    return seasonal_period(frequency), step, fixed


def origins_of(first_steps: np.ndarray, frequency: str) -> np.ndarray:
    """(n,) first forecast timestamps -> the windows' last timestamps (one step earlier)."""
    _, step, fixed = calendar_of(frequency)
    if fixed is not None:
        return first_steps - fixed
    return (pd.DatetimeIndex(first_steps) - step).to_numpy().astype("datetime64[us]")  # calendar steps


def batch_rows(records: list[ForecastRecord], logged_at: datetime, dialect: str) -> Rows:
    """The rows of a batch of records: a forecast per series, a step per series and horizon step.
    Records of the same shape (frequency, horizon, look-back, interval level: in practice all of
    them) are stacked and built together, column by column with numpy: this runs for every
    answered forecast, in a thread that shares the interpreter with the event loop."""
    groups: dict[tuple, list[ForecastRecord]] = {}
    for record in records:
        level = record.levels[0] if record.levels else None
        key = (record.frequency, record.mean.shape[1], record.past_target.shape[1], level)
        groups.setdefault(key, []).append(record)
    logged = sql_times(np.array([logged_at], dtype="datetime64[us]"), dialect)[0]
    batch = Rows([], [])
    for group in groups.values():
        headers, steps = group_rows(group, logged, dialect)
        steps.owner += len(batch.forecasts)
        batch.forecasts.extend(headers)
        batch.steps.append(steps)
    return batch


def group_rows(group: list[ForecastRecord], logged: object, dialect: str) -> tuple[list[tuple], StepColumns]:
    """The forecast rows and step columns of records of one shape, with the baselines of each
    window (forecaster.baselines, the functions `forecast evaluate` scores with, so live and
    offline figures agree)."""
    first = group[0]
    past = np.concatenate([r.past_target for r in group])  # (n, L)
    mean = np.concatenate([r.mean for r in group])  # (n, H)
    n, horizon = mean.shape
    period = calendar_of(first.frequency)[0]
    baselines = baseline_forecasts(past, horizon, period)
    naive, seasonal = baselines["naive"], baselines.get("seasonal_naive")
    level = first.levels[0] if first.levels else None
    bounds: list = [None, None]
    if level is not None:
        quantiles = interval_quantiles(level)
        if all(q in r.quantiles for r in group for q in quantiles):
            bounds = [np.concatenate([r.quantiles[q] for r in group]).ravel() for q in quantiles]
        else:
            level = None
    targets = np.concatenate([np.stack(r.future_times) for r in group]).astype("datetime64[us]")  # (n, H)
    origins = sql_times(origins_of(targets[:, 0], first.frequency), dialect)  # the windows' last timestamps
    last_targets = sql_times(targets[:, -1], dialect)
    series = [(r, series_id) for r in group for series_id in r.series_ids]
    scales = window_scales(past, period).tolist()
    headers = [
        (r.request_id, series_id, r.role, r.model_name, r.model_version, r.model_alias, origin, last,
         horizon, level, scale, logged)
        for (r, series_id), origin, last, scale in zip(series, origins, last_targets, scales, strict=True)
    ]  # fmt: skip
    steps = StepColumns(
        owner=np.repeat(np.arange(n), horizon),
        step=np.tile(np.arange(1, horizon + 1), n),
        target_time=targets.ravel(),
        forecast=np.asarray(mean, dtype=np.float64).ravel(),
        lower=bounds[0],
        upper=bounds[1],
        naive=np.asarray(naive, dtype=np.float64).ravel(),
        seasonal_naive=None if seasonal is None else np.asarray(seasonal, dtype=np.float64).ravel(),
    )
    return headers, steps


def window_scales(past: np.ndarray, period: int) -> np.ndarray:
    """forecaster.metrics.seasonal_naive_scale of each window (its in-sample seasonal-naive MAE,
    MASE's scale), for all windows at once: (n, L) -> (n,)."""
    lag = min(period, past.shape[1] - 1)
    return np.mean(np.abs(past[:, lag:] - past[:, :-lag]), axis=1)


def sql_times(times: np.ndarray, dialect: str) -> list:
    """datetime64[us] as the driver stores them: on SQLite the very text SQLAlchemy's DateTime
    writes, "YYYY-MM-DD HH:MM:SS.ffffff" (the actuals are written through it, and the join
    compares the two texts). Years 1000-9999 only: the API takes 1677-2262."""
    times = np.ravel(times)
    if dialect != "sqlite":
        return times.tolist()  # datetime objects
    text = np.datetime_as_string(times, unit="us")  # (n,) "YYYY-MM-DDTHH:MM:SS.ffffff", <U26
    characters = text.view(np.uint32).reshape(len(text), text.itemsize // 4)  # UCS-4 codes
    if len(text) and not (characters[:, 10] == ord("T")).all():
        raise ValueError("a timestamp outside the years 1000-9999 (or NaT) cannot be logged")
    characters[:, 10] = ord(" ")  # the "T": numpy's string ops would go value by value
    return text.tolist()


# The PostgreSQL types of the forecasts' columns, for binary COPY: psycopg then dumps each value with the
# column's own C dumper instead of looking one up per value.
FORECAST_TYPES = (
    "int8", "text", "text", "text", "text", "text", "text", "timestamp", "timestamp", "int4", "float8",
    "float8", "timestamp",
)  # fmt: skip


def insert_rows(connection: Connection, rows: Rows) -> None:
    """A batch's rows straight to the driver, bypassing SQLAlchemy's per-row parameter processing
    (it cost more than the rest of the log's work put together).

    The forecasts are numbered first, so their steps can name them: PostgreSQL hands out the ids
    from the table's sequence (other workers may take ids meanwhile); SQLite numbers each new row
    one past the largest id, and the transaction holds the only write lock from its first insert,
    so this batch's forecasts got the last ``len(rows.forecasts)`` ids, in order.

    Through psycopg 3 the rows go by binary COPY, the steps as one buffer numpy built: an
    executemany of 24 rows per forecast cost the writer thread 4-5x the CPU
    (benchmarks/forecast_log_bench.py)."""
    if not rows.forecasts:
        return
    dialect = connection.dialect
    if dialect.name == "postgresql":
        ids = np.array(
            connection.exec_driver_sql(
                "SELECT nextval(pg_get_serial_sequence('forecasts', 'id')) FROM generate_series(1, %(n)s)",
                {"n": len(rows.forecasts)},
            ).scalars().all()
        )  # fmt: skip
        forecast_rows = [(id_, *row) for id_, row in zip(ids.tolist(), rows.forecasts, strict=True)]
        if dialect.driver == "psycopg":
            copy_to_postgres(connection.connection.driver_connection, forecast_rows, rows.steps, ids)
            return
        insert_many(connection, "forecasts", ("id", *FORECAST_COLUMNS), forecast_rows)
    elif dialect.name == "sqlite":
        insert_many(connection, "forecasts", FORECAST_COLUMNS, rows.forecasts)
        newest = connection.exec_driver_sql("SELECT max(id) FROM forecasts").scalar_one()
        ids = np.arange(newest - len(rows.forecasts) + 1, newest + 1)
    else:
        raise RuntimeError(f"the forecast log supports SQLite and PostgreSQL, not {dialect.name}")
    insert_many(connection, "forecast_steps", STEP_COLUMNS, rows.step_rows(ids, dialect.name))


def copy_to_postgres(
    driver: Any, forecast_rows: list[tuple], steps: list[StepColumns], ids: np.ndarray
) -> None:
    """Binary COPY through psycopg 3's own connection: the forecasts row by row with their
    column types declared, the steps as one buffer numpy built."""
    forecast_columns = ", ".join(("id", *FORECAST_COLUMNS))
    step_columns = ", ".join(STEP_COLUMNS)
    with driver.cursor() as cursor:
        with cursor.copy(f"COPY forecasts ({forecast_columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(FORECAST_TYPES)
            for row in forecast_rows:
                copy.write_row(row)
        body = b"".join(block.pg_binary(ids) for block in steps)
        with cursor.copy(f"COPY forecast_steps ({step_columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(PG_COPY_SIGNATURE + body + PG_COPY_TRAILER)


def insert_many(connection: Connection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    markers = ", ".join([marker] * len(columns))
    connection.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({markers})", rows)


class LogHealth:
    """What /readyz and the metrics say about the log: counts and the last error (redacted)."""

    def __init__(self) -> None:
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self.error: str | None = None
        self.error_at: float | None = None
        self.last_write: float | None = None

    @property
    def failing(self) -> bool:
        return self.error is not None


class ForecastLog(QueueWorker[ForecastRecord]):
    """The bounded queue and the writer thread in front of the database."""

    name = "forecast-log"

    def __init__(
        self,
        url: str,
        metrics: ServiceMetrics,
        max_queued: int = 10_000,
        batch: int = 500,
        retention_days: float = 90.0,
        max_steps: int = 5_000_000,
        wait_s: float = 0.1,
    ) -> None:
        super().__init__(max_queued)
        self.url = url
        self.shown_url = redact(url) or ""
        self.metrics = metrics
        self.engine = connect(url)
        self.batch = batch
        self.wait_s = wait_s
        self.retention = timedelta(days=retention_days)
        self.max_steps = max_steps
        self.health = LogHealth()
        self._last_prune = 0.0
        self._up = metrics.log_up
        self._counted = {
            outcome: metrics.log_records.labels(outcome) for outcome in ("written", "dropped", "failed")
        }

    # -- the request path -------------------------------------------------------------------
    def submit(self, record: ForecastRecord) -> None:
        """Queue a record for writing; never blocks. A full queue drops it (counted)."""
        if not self.offer(record):
            self.health.dropped += len(record.series_ids)
            self._counted["dropped"].inc(len(record.series_ids))

    def stop(self, timeout: float = 5.0) -> bool:
        """Write what is queued (within ``timeout``), then stop the writer and close the
        database's connections: nothing of the log touches the database after this returns True."""
        stopped = super().stop(timeout)
        if stopped:
            self.engine.dispose()
        return stopped

    # -- the writer thread ------------------------------------------------------------------
    def run(self) -> None:
        while True:
            records = [self.queue.get()]
            if records[0] is not None and self.queue.qsize() < self.batch:
                # a batch gathers company while this thread sleeps: one wake-up per batch. Waiting
                # on the queue instead woke it for every forecast, and each wake-up took the
                # interpreter from the event loop
                time.sleep(self.wait_s)
            while len(records) < self.batch and records[-1] is not None:
                try:
                    records.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(record is None for record in records)
            work = [record for record in records if record is not None]
            try:
                if work:
                    started = time.thread_time()  # this thread's CPU: what the log costs the process
                    self._write(work)
                    self.metrics.log_writer_cpu.inc(time.thread_time() - started)
            finally:
                for _ in records:
                    self.queue.task_done()
            self.metrics.log_queue_depth.set(self.queue.qsize())
            if stop:
                return

    def _write(self, records: list[ForecastRecord]) -> None:
        forecasts = sum(len(record.series_ids) for record in records)
        try:
            create_tables(self.engine)
            now, dialect = utc_now(), self.engine.dialect.name
            rows = batch_rows(records, now, dialect)
            with self.engine.begin() as connection:
                insert_rows(connection, rows)
            self._prune_now_and_then()
        except Exception as exc:  # the log must never take the service down: count, keep, back off
            self.health.failed += forecasts
            self._counted["failed"].inc(forecasts)
            self._failed(exc)
            time.sleep(min(1.0, 0.05 * self.queue.qsize() + 0.1))  # do not spin on a dead database
            return
        self.health.written += forecasts
        self.health.last_write = time.time()
        self.health.error = None
        self._up.set(1)
        self._counted["written"].inc(forecasts)

    def _failed(self, exc: BaseException) -> None:
        first_line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if self.health.error is None:
            log.error("the forecast log %s is failing: %s", self.shown_url, redact(first_line))
        self.health.error = redact(first_line)
        self.health.error_at = time.time()
        self._up.set(0)

    def _prune_now_and_then(self, every_s: float = 600.0) -> None:
        """Retention: forecast steps and actuals logged longer ago than ``retention``, and the
        oldest steps beyond ``max_steps``, every ten minutes."""
        if time.monotonic() - self._last_prune < every_s:
            return
        self._last_prune = time.monotonic()
        prune(self.engine, self.retention, self.max_steps)


def prune(engine: Engine, retention: timedelta, max_steps: int) -> None:
    """Delete forecasts (with their steps) and actuals logged longer ago than ``retention``, and
    the oldest forecasts beyond ``max_steps`` steps in all. Whatever the ids, a forecast is deleted
    for its age only when its own ``logged_at`` is past the cut-off: a batch another worker
    commits meanwhile, or one stamped by a clock running ahead, loses nothing it should keep."""
    cutoff = utc_now() - retention
    f = forecasts
    with engine.begin() as connection:
        connection.execute(delete(actuals).where(actuals.c.received_at < cutoff))
        if connection.dialect.name == "sqlite":
            # no index on logged_at: bound the scan by id. One database file, one clock, one
            # writer at a time: ids grow with logged_at, so the expired forecasts are those below
            # the oldest one still kept (found walking up from the oldest id, over them)
            first_kept = connection.execute(
                select(f.c.id).where(f.c.logged_at >= cutoff).order_by(f.c.id).limit(1)
            ).scalar()
            delete_forecasts(connection, below=first_kept, expired=None)
        else:
            delete_forecasts(connection, below=None, expired=f.c.logged_at < cutoff)
        beyond_cap = select(
            f.c.id, func.sum(f.c.horizon).over(order_by=f.c.id.desc()).label("newer")
        ).subquery()
        last_deleted = connection.execute(
            select(func.max(beyond_cap.c.id)).where(beyond_cap.c.newer > max_steps)
        ).scalar()
        if last_deleted is not None:
            delete_forecasts(connection, below=last_deleted + 1, expired=None)


def delete_forecasts(connection: Connection, below: int | None, expired: object) -> None:
    """Delete the forecasts with an id below ``below`` (None: any id) that match ``expired`` (a
    condition; None: all of them), and their steps.

    SQLite is given only ``below`` (every forecast under it is to go): its steps are stored in
    (forecast_id, step) order, so they are one range at the start of the table."""
    f, s = forecasts, forecast_steps
    if connection.dialect.name == "sqlite":
        connection.execute(delete(s) if below is None else delete(s).where(s.c.forecast_id < below))
        connection.execute(delete(f) if below is None else delete(f).where(f.c.id < below))
        return
    chosen = select(f.c.id)
    if below is not None:
        chosen = chosen.where(f.c.id < below)
    if expired is not None:
        chosen = chosen.where(expired)  # type: ignore[arg-type]
    connection.execute(delete(s).where(s.c.forecast_id.in_(chosen)))
    connection.execute(delete(f).where(f.c.id.in_(chosen)))


def upsert_actuals(engine: Engine, rows: list[dict]) -> None:
    """Store actuals in one transaction: new (series, time) pairs are inserted, known ones get
    the new value (a correction), so sending a value twice stores it once."""
    create_tables(engine)
    dialect = engine.dialect.name
    if dialect == "postgresql":
        statement = postgres_insert(actuals)
    elif dialect == "sqlite":
        statement = sqlite_insert(actuals)
    else:
        raise RuntimeError(f"the forecast log supports SQLite and PostgreSQL, not {dialect}")
    statement = statement.on_conflict_do_update(
        index_elements=[actuals.c.series_id, actuals.c.time],
        set_={"value": statement.excluded.value, "received_at": statement.excluded.received_at},
    )
    with engine.begin() as connection:
        connection.execute(statement, rows)


def resolved_count(engine: Engine, rows: list[dict]) -> int:
    """How many logged forecast steps the given actuals resolve. Per series, the index on
    (series_id, last_target) finds its forecasts not over before the earliest actual, and each
    one's steps are a range of their key."""
    if not rows:
        return 0
    total = 0
    by_series: dict[str, list[datetime]] = {}
    for row in rows:
        by_series.setdefault(row["series_id"], []).append(row["time"])
    f, s = forecasts, forecast_steps
    with engine.connect() as connection:
        for series_id, times in by_series.items():
            total += connection.execute(
                select(func.count())
                .select_from(f.join(s, s.c.forecast_id == f.c.id))
                .where(
                    f.c.series_id == series_id,
                    f.c.last_target >= min(times),
                    f.c.origin < max(times),
                    s.c.target_time.in_(times),
                )
            ).scalar_one()
    return total
