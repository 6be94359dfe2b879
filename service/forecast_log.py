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
    LargeBinary,
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
# ``origin``, with that window's MASE scale, and its H horizon steps as arrays (``STEP_ARRAYS``:
# little-endian binary, H values each; expand_steps reads them back). One row, not H: with a row
# per step (24 per forecast) the writer thread took 132 us of CPU per forecast on SQLite and 52 us
# on PostgreSQL, with one row 50 and 45 us (benchmarks/serve_bench.py --forecast-log), and the
# monitor reads whole forecasts anyway. The index
# on (series_id, last_target) finds the forecasts an actual can resolve: those of its series not
# over before it.
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
    Column("horizon", Integer, nullable=False),  # H: how many values each step array holds
    Column("level", Float),  # the nominal level of its interval bounds, when it has them
    Column("scale", Float, nullable=False),  # the window's in-sample seasonal-naive MAE (MASE's scale)
    Column("logged_at", DateTime, nullable=False),  # wall clock (UTC): retention goes by this
    # the steps: what was forecast for each target time, beside the naive and seasonal-naive
    # forecasts of the same window
    Column("target_times", LargeBinary, nullable=False),  # int64 microseconds since 1970-01-01 UTC
    Column("forecast", LargeBinary, nullable=False),  # float64, as are the four below
    Column("lower", LargeBinary),  # the model's first interval level, when it has one
    Column("upper", LargeBinary),
    Column("naive", LargeBinary, nullable=False),
    Column("seasonal_naive", LargeBinary),  # when the look-back holds a whole season
    Index("ix_forecasts_series_last_target", "series_id", "last_target"),
)
STEP_ARRAYS = {"target_times": "<i8", "forecast": "<f8", "lower": "<f8", "upper": "<f8", "naive": "<f8",
               "seasonal_naive": "<f8"}  # fmt: skip
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
    """A log written by an earlier version has tables of another layout (they kept a row per
    horizon step in a ``forecast_steps`` table). Its rows cannot be read as forecasts of this
    layout, and quietly renaming or rewriting someone's tables is worse than saying so."""
    inspector = inspect(engine)
    found = None
    if inspector.has_table("forecast_steps"):
        found = "it has a forecast_steps table"
    elif inspector.has_table(forecasts.name):
        present = {column["name"] for column in inspector.get_columns(forecasts.name)}
        missing = [column.name for column in forecasts.columns if column.name not in present]
        if missing:
            found = f"its forecasts table has no {', '.join(missing)}"
    if found:
        raise RuntimeError(
            f"the forecast log {redact(str(engine.url))} was written by an earlier version of the "
            f"service ({found}): point FORECAST_LOG_URL at a new database, or move its forecasts "
            "and forecast_steps tables away"
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


FORECAST_COLUMNS = tuple(column.name for column in forecasts.columns if column.name != "id")
POSTGRES_TYPES = {
    String: "text",
    DateTime: "timestamp",
    Integer: "int4",
    Float: "float8",
    LargeBinary: "bytea",
}
# their PostgreSQL types, for binary COPY: psycopg then dumps each value with the column's own C
# dumper instead of looking one up per value
FORECAST_TYPES = tuple(POSTGRES_TYPES[type(forecasts.c[name].type)] for name in FORECAST_COLUMNS)


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


def batch_rows(records: list[ForecastRecord], logged_at: datetime, dialect: str) -> list[tuple]:
    """The rows (FORECAST_COLUMNS) of a batch of records, one per series. Records of the same shape
    (frequency, horizon, look-back, interval level: in practice all of them) are stacked and built
    together, column by column with numpy: this runs for every answered forecast, in a thread that
    shares the interpreter with the event loop."""
    groups: dict[tuple, list[ForecastRecord]] = {}
    for record in records:
        level = record.levels[0] if record.levels else None
        key = (record.frequency, record.mean.shape[1], record.past_target.shape[1], level)
        groups.setdefault(key, []).append(record)
    logged = sql_times(np.array([logged_at], dtype="datetime64[us]"), dialect)[0]
    return [row for group in groups.values() for row in group_rows(group, logged, dialect)]


def group_rows(group: list[ForecastRecord], logged: object, dialect: str) -> list[tuple]:
    """The rows of records of one shape, with the baselines of each window (forecaster.baselines,
    the functions `forecast evaluate` scores with, so live and offline figures agree)."""
    first = group[0]
    past = np.concatenate([r.past_target for r in group])  # (n, L)
    mean = np.concatenate([r.mean for r in group])  # (n, H)
    n, horizon = mean.shape
    period = calendar_of(first.frequency)[0]
    baselines = baseline_forecasts(past, horizon, period)
    level = first.levels[0] if first.levels else None
    bounds: list[np.ndarray | None] = [None, None]
    if level is not None:
        quantiles = interval_quantiles(level)
        if all(q in r.quantiles for r in group for q in quantiles):
            bounds = [np.concatenate([r.quantiles[q] for r in group]) for q in quantiles]
        else:
            level = None
    targets = np.concatenate([np.stack(r.future_times) for r in group]).astype("datetime64[us]")  # (n, H)
    origins = sql_times(origins_of(targets[:, 0], first.frequency), dialect)  # the windows' last timestamps
    last_targets = sql_times(targets[:, -1], dialect)
    arrays = [
        step_bytes(array, STEP_ARRAYS[name], n)
        for name, array in (
            ("target_times", targets.view(np.int64)),
            ("forecast", mean),
            ("lower", bounds[0]),
            ("upper", bounds[1]),
            ("naive", baselines["naive"]),
            ("seasonal_naive", baselines.get("seasonal_naive")),
        )
    ]
    series = [(r, series_id) for r in group for series_id in r.series_ids]
    scales = window_scales(past, period).tolist()
    return [
        (r.request_id, series_id, r.role, r.model_name, r.model_version, r.model_alias, origin, last,
         horizon, level, scale, logged, *steps)
        for (r, series_id), origin, last, scale, *steps in zip(
            series, origins, last_targets, scales, *arrays, strict=True
        )
    ]  # fmt: skip


def step_bytes(array: np.ndarray | None, kind: str, n: int) -> list[bytes | None]:
    """(n, H) -> n binary arrays of H values (None: the column is absent for these forecasts)."""
    if array is None:
        return [None] * n
    whole = np.ascontiguousarray(array, dtype=kind)
    return [row.tobytes() for row in whole]


def window_scales(past: np.ndarray, period: int) -> np.ndarray:
    """forecaster.metrics.seasonal_naive_scale of each window (its in-sample seasonal-naive MAE,
    MASE's scale), for all windows at once: (n, L) -> (n,)."""
    lag = min(period, past.shape[1] - 1)
    return np.mean(np.abs(past[:, lag:] - past[:, :-lag]), axis=1)


def sql_times(times: np.ndarray, dialect: str) -> list:
    """datetime64[us] as the driver stores them: on SQLite the very text SQLAlchemy's DateTime
    writes, "YYYY-MM-DD HH:MM:SS.ffffff" (the actuals are written through it, and queries compare
    the two texts). Years 1000-9999 only: the API takes 1677-2262."""
    times = np.ravel(times)
    if dialect != "sqlite":
        return times.tolist()  # datetime objects
    text = np.datetime_as_string(times, unit="us")  # (n,) "YYYY-MM-DDTHH:MM:SS.ffffff", <U26
    characters = text.view(np.uint32).reshape(len(text), text.itemsize // 4)  # UCS-4 codes
    if len(text) and not (characters[:, 10] == ord("T")).all():
        raise ValueError("a timestamp outside the years 1000-9999 (or NaT) cannot be logged")
    characters[:, 10] = ord(" ")  # the "T": numpy's string ops would go value by value
    return text.tolist()


def insert_rows(connection: Connection, rows: list[tuple]) -> None:
    """A batch's rows straight to the driver, bypassing SQLAlchemy's per-row parameter processing
    (it cost more than the rest of the log's work put together): through psycopg 3 by binary
    COPY, otherwise one executemany."""
    if not rows:
        return
    dialect = connection.dialect
    if dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"the forecast log supports SQLite and PostgreSQL, not {dialect.name}")
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        copy_to_postgres(connection.connection.driver_connection, rows)
        return
    marker = "?" if dialect.paramstyle == "qmark" else "%s"
    markers = ", ".join([marker] * len(FORECAST_COLUMNS))
    columns = ", ".join(FORECAST_COLUMNS)
    connection.exec_driver_sql(f"INSERT INTO forecasts ({columns}) VALUES ({markers})", rows)


def copy_to_postgres(driver: Any, rows: list[tuple]) -> None:
    """Binary COPY through psycopg 3's own connection, the columns' types declared."""
    statement = f"COPY forecasts ({', '.join(FORECAST_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(FORECAST_TYPES)
        for row in rows:
            copy.write_row(row)


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
        self.queued_total = 0  # records queued since start (the request path counts them)
        self.handled_total = 0  # of those, handled by the writer (written or failed)
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
            return
        self.queued_total += 1  # a lost update between threads only makes written_through wait less

    def written_through(self, timeout: float) -> bool:
        """Wait (up to ``timeout``) until every record queued before this call has been handled
        by the writer (written, or failed and counted). POST /v1/actuals waits so, and its count
        of resolved steps includes the forecasts answered just before: a client that forecasts
        and then posts the actuals would otherwise be told 0 while the writer gathers its batch.
        Records queued meanwhile are not waited for, so a busy log cannot hold the caller."""
        target = self.queued_total
        deadline = time.monotonic() + timeout
        while self.handled_total < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

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
                self.handled_total += len(work)
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
    """Delete forecasts and actuals logged longer ago than ``retention``, and
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
    """Delete the forecasts (their steps are part of the row) with an id below ``below`` (None:
    any id) that match ``expired`` (a condition; None: all of them)."""
    f = forecasts
    statement = delete(f)
    if below is not None:
        statement = statement.where(f.c.id < below)
    if expired is not None:
        statement = statement.where(expired)  # type: ignore[arg-type]
    connection.execute(statement)


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
    (series_id, last_target) finds its forecasts not over before the earliest actual and begun
    before the latest; their target times are matched against the actuals' in numpy."""
    if not rows:
        return 0
    total = 0
    by_series: dict[str, list[datetime]] = {}
    for row in rows:
        by_series.setdefault(row["series_id"], []).append(row["time"])
    f = forecasts
    with engine.connect() as connection:
        for series_id, times in by_series.items():
            logged = connection.execute(
                select(f.c.target_times).where(
                    f.c.series_id == series_id, f.c.last_target >= min(times), f.c.origin < max(times)
                )
            ).scalars()
            targets = np.frombuffer(b"".join(logged), dtype=STEP_ARRAYS["target_times"])
            total += int(np.isin(targets, np.array(times, dtype="datetime64[us]").view(np.int64)).sum())
    return total


def expand_steps(rows: pd.DataFrame) -> pd.DataFrame:
    """Forecast rows as read from ``forecasts`` -> one row per horizon step: their other columns
    repeated, ``step`` (1..H), ``target_time`` (datetime64[us]) and a float column per step array
    (NaN where a forecast has none: no interval, no whole season)."""
    horizons = rows["horizon"].to_numpy(np.int64)
    steps = rows.drop(columns=list(STEP_ARRAYS)).loc[rows.index.repeat(horizons)].reset_index(drop=True)
    steps["step"] = np.concatenate([np.arange(1, h + 1) for h in horizons]) if len(rows) else []
    steps["level"] = steps["level"].astype(float)  # NaN without an interval, in every chunk alike
    for name, kind in STEP_ARRAYS.items():
        values = step_values(
            rows[name].tolist(), horizons, kind, rows["id"].tolist() if "id" in rows else None
        )
        steps[name] = values.view("datetime64[us]") if name == "target_times" else values
    return steps.rename(columns={"target_times": "target_time"})


def step_values(
    blobs: list[bytes | None], horizons: np.ndarray, kind: str, ids: list[int] | None = None
) -> np.ndarray:
    """One step array's blobs (None: absent) -> their values end to end, NaN for the absent. A
    blob of another length than its forecast's horizon (a row edited by hand, a truncated copy)
    would shift every later step onto the wrong forecast: refused, naming the forecast."""
    width = np.dtype(kind).itemsize
    for k, (blob, horizon) in enumerate(zip(blobs, horizons.tolist(), strict=True)):
        if blob is not None and len(blob) != horizon * width:
            which = f"forecast id {ids[k]}" if ids is not None else f"forecast row {k}"
            raise ValueError(
                f"the forecast log's {which} has a step array of {len(blob)} bytes, not {horizon} values"
            )
    missing = {h for blob, h in zip(blobs, horizons.tolist(), strict=True) if blob is None}
    absent = {h: np.full(h, np.nan, dtype=kind).tobytes() for h in missing}  # float arrays only
    pairs = zip(blobs, horizons.tolist(), strict=True)
    joined = b"".join(absent[h] if blob is None else blob for blob, h in pairs)
    return np.frombuffer(joined, dtype=kind).astype(kind[1:])  # type: ignore[arg-type]
