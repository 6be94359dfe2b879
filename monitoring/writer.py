"""The forecast log's writer: a bounded queue the predict handler hands its answered forecasts to,
and a thread that writes them in batches.

Why off the request path: a prediction must never wait for, or fail because of, the log. The
handler only hands the arrays it already holds to ``ForecastLog.submit`` (``put_nowait``); the
thread turns them into rows (baselines included), inserts them and resolves any whose actuals are
already known, one transaction per batch.

Nothing is lost without a word: every forecast handed over ends counted in
``forecast_log_records_total`` as written, dropped (queue full), failed (the database refused, or
the SQLite file was deleted or replaced under the service), duplicate (a retry of a logged
Idempotency-Key, or a forecast the log holds already, to float32's precision) or abandoned (still
queued when shutdown's drain budget ran out, with a log line). A record the database refuses
for its own content fails alone, not its batch."""

from __future__ import annotations

import logging
import queue
import time
from datetime import timedelta

import numpy as np
from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from infra.redaction import redact
from monitoring.bulk import insert_many
from monitoring.database import LogDatabase, LogUnavailable
from monitoring.metrics import LogMetrics
from monitoring.queue_worker import QueueWorker
from monitoring.records import FORECAST_COLUMNS, ForecastRecord, batch_rows, utc_now
from monitoring.resolution import as_datetime, chunks, lock_series, resolve_new_forecasts
from monitoring.retention import prune
from monitoring.schema import STEP_ARRAYS, forecasts, idempotency_keys

log = logging.getLogger("monitoring.writer")

# errors of the database itself (down, unreachable, locked, full, its file gone): every record of
# the batch would meet them, so the batch fails as one
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    DisconnectionError,
    PoolTimeoutError,
    LogUnavailable,
    OSError,
)
try:  # psycopg's own errors, raised through binary COPY on its connection
    import psycopg

    DATABASE_ERRORS += (psycopg.OperationalError, psycopg.InterfaceError)
except ImportError:  # pragma: no cover - psycopg is a dependency
    pass


def database_error(exc: BaseException) -> bool:
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, DATABASE_ERRORS)


FORECAST_AT = FORECAST_COLUMNS.index("forecast")  # where a row holds its forecast's bytes
# two forecasts are the same within float32's precision: the service batches concurrent requests
# into one forward pass, and a row's output differs by ~1e-7 relative between batch sizes
SAME_RTOL = 1e-5
SAME_ATOL = 1e-6  # of the forecasts' magnitude: for values near 0 in a series far from it


def not_logged_yet(connection: Connection, rows: list[tuple]) -> list[tuple]:
    """``rows`` (FORECAST_COLUMNS) less those whose very forecast the log already holds, or holds
    earlier in the batch: the same model version's forecast of a series from the same origin
    with the same values (``same_forecast``), sent again without an Idempotency-Key. Stored
    twice, each of its actuals would count twice in the monitor. A forecast from the same origin
    with other values was made from other inputs (a corrected history, other future covariates):
    it is a forecast of its own, and stored. One query through the (series_id, last_target) index
    per batch: a repeat has its original's last target. Called with the batch's series locked
    (PostgreSQL), so two replicas cannot both store one."""
    if not rows:
        return rows
    series_ids = sorted({row[1] for row in rows})
    lasts = [as_datetime(row[7]) for row in rows]
    f = forecasts
    held: dict[tuple, list[np.ndarray]] = {}
    for some in chunks(series_ids):
        query = select(
            f.c.role, f.c.model_name, f.c.model_version, f.c.series_id, f.c.origin, f.c.forecast
        ).where(f.c.series_id.in_(some), f.c.last_target >= min(lasts), f.c.last_target <= max(lasts))
        for found in connection.execute(query):
            key = (*found[:4], as_datetime(found[4]))
            held.setdefault(key, []).append(forecast_values(found[5]))
    kept = []
    for row in rows:
        key = (row[2], row[3], row[4], row[1], as_datetime(row[6]))  # role, model, version, series, origin
        values = forecast_values(row[FORECAST_AT])
        if not any(same_forecast(values, other) for other in held.get(key, [])):
            held.setdefault(key, []).append(values)
            kept.append(row)
    return kept


def forecast_values(blob: bytes) -> np.ndarray:
    return np.frombuffer(bytes(blob), dtype=STEP_ARRAYS["forecast"])


def same_forecast(one: np.ndarray, other: np.ndarray) -> bool:
    """Equal to float32's precision (NaN equal to NaN): bytes equality stored a retry twice when
    it landed in a batch of another size. ``SAME_ATOL`` scales with the forecasts' magnitude."""
    if one.shape != other.shape:
        return False
    both = np.abs(np.concatenate([one, other]))
    scale = float(both[np.isfinite(both)].max(initial=0.0))
    return bool(np.allclose(one, other, rtol=SAME_RTOL, atol=SAME_ATOL * scale, equal_nan=True))


class LogHealth:
    """What /readyz and the metrics say about the log: counts and the last error (redacted)."""

    def __init__(self) -> None:
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self.duplicates = 0
        self.abandoned = 0
        self.error: str | None = None

    @property
    def failing(self) -> bool:
        return self.error is not None


class ForecastLog(QueueWorker[ForecastRecord]):
    """The bounded queue and the writer thread in front of the database."""

    name = "forecast-log"

    def __init__(
        self,
        database: LogDatabase,
        metrics: LogMetrics,
        max_queued: int = 10_000,
        batch: int = 500,
        retention_days: float = 90.0,
        max_steps: int = 5_000_000,
        wait_s: float = 0.1,
        idempotency_hours: float = 24.0,
        drain_s: float = 5.0,
    ) -> None:
        super().__init__(max_queued)
        self.database = database
        self.shown_url = database.shown_url
        self.metrics = metrics
        self.batch = batch
        self.wait_s = wait_s
        self.drain_s = drain_s
        self.retention = timedelta(days=retention_days)
        self.max_steps = max_steps
        self.idempotency = timedelta(hours=idempotency_hours)
        self.health = LogHealth()
        self.queued_total = 0  # records queued since start (the request path counts them)
        self.handled_total = 0  # of those, handled by the writer (written, failed or duplicate)
        self.in_flight = 0  # forecasts the writer holds in the batch it is writing
        self._last_prune = 0.0
        self._counted = {outcome: metrics.records.labels(outcome) for outcome in
                         ("written", "dropped", "failed", "duplicate", "abandoned")}  # fmt: skip

    # -- the request path -------------------------------------------------------------------
    def submit(self, record: ForecastRecord) -> None:
        """Queue a record for writing; never blocks. A full queue drops it (counted)."""
        if not self.offer(record):
            self._count("dropped", len(record.series_ids))
            return
        self.queued_total += 1  # a lost update between threads only makes written_through wait less

    def written_through(self, timeout: float) -> bool:
        """Wait (up to ``timeout``) until every record queued before this call has been handled
        by the writer. POST /v1/actuals waits so: its values then resolve the forecasts answered
        just before it, and its count says so. Records queued meanwhile are not waited for, so a
        busy log cannot hold the caller."""
        target = self.queued_total
        deadline = time.monotonic() + timeout
        while self.handled_total < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def stop(self, timeout: float | None = None) -> bool:
        """Write what is queued within ``timeout`` (default: the drain budget), then stop the writer
        and close the database's connections. Whatever is still queued after it is counted as
        abandoned and logged; a batch the writer is still stuck on is named in the same line."""
        budget = self.drain_s if timeout is None else timeout
        stopped = super().stop(budget)
        abandoned = self._abandon_queued()
        if abandoned or not stopped:
            in_flight = "" if stopped else f"; a batch of {self.in_flight} forecasts was still being written"
            log.error(
                "the forecast log %s did not drain within %g s: %d queued forecasts were not written%s",
                self.shown_url,
                budget,
                abandoned,
                in_flight,
            )
        if stopped:
            self.database.dispose()
        return stopped

    def _abandon_queued(self) -> int:
        """Empty the queue without writing, counting its forecasts; the stop sign goes back in, so
        a writer stuck on the database ends once it is answered."""
        abandoned, stop_sign = 0, False
        while True:
            try:
                record = self.queue.get_nowait()
            except queue.Empty:
                break
            self.queue.task_done()
            if record is None:
                stop_sign = True
            else:
                abandoned += len(record.series_ids)
        if stop_sign:
            self.queue.put_nowait(None)
        if abandoned:
            self._count("abandoned", abandoned)
        return abandoned

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
                    self.in_flight = sum(len(record.series_ids) for record in work)
                    started = time.thread_time()  # this thread's CPU: what the log costs the process
                    self._write(work)
                    self.metrics.writer_cpu.inc(time.thread_time() - started)
            finally:
                self.in_flight = 0
                self.handled_total += len(work)
                for _ in records:
                    self.queue.task_done()
            self.metrics.queue_depth.set(self.queue.qsize())
            if stop:
                return

    def _write(self, records: list[ForecastRecord]) -> None:
        """One transaction for the batch. A database error fails it whole (and the thread backs
        off); any other error is a record's own: each is then written alone, and only the
        records that fail again are counted failed."""
        try:
            self.write_batch(records)
        except Exception as exc:  # the log must never take the service down: count, keep, back off
            if database_error(exc) or len(records) == 1:
                self._failed(records, exc)
                if database_error(exc):
                    time.sleep(min(1.0, 0.05 * self.queue.qsize() + 0.1))  # do not spin on a dead database
                return
            for k, record in enumerate(records):
                try:
                    self.write_batch([record])
                except Exception as alone:
                    if database_error(alone):  # it went down meanwhile: the rest would wait on it too
                        self._failed(records[k:], alone)
                        return
                    self._failed([record], alone)
            return
        self._prune_now_and_then()

    def write_batch(self, records: list[ForecastRecord]) -> None:
        """Write ``records`` in one transaction in the calling thread, raising what the database
        raises (the writer thread calls it for each batch; a backfill or benchmark may too)."""
        now = utc_now()
        with self.database.begin() as connection:
            fresh = self._first_of_their_keys(connection, records, now)
            rows = batch_rows(fresh, now, connection.dialect.name)
            lock_series(connection, {row[1] for row in rows})
            rows = not_logged_yet(connection, rows)
            insert_many(connection, forecasts, FORECAST_COLUMNS, rows)
            resolve_new_forecasts(connection, rows, now)
        written = len(rows)
        duplicates = sum(len(record.series_ids) for record in records) - written
        self.health.written += written
        self.health.duplicates += duplicates
        self.health.error = None
        self.metrics.up.set(1)
        self._count("written", written)
        self._count("duplicate", duplicates)

    def _first_of_their_keys(
        self, connection: Connection, records: list[ForecastRecord], now: object
    ) -> list[ForecastRecord]:
        """The records to write: those without an Idempotency-Key, and the first with each key
        (per role: the champion's and the challenger's records of a request carry the same key)
        that the log has not seen. The keys are stored in the same transaction as the forecasts."""
        keyed: dict = {}
        for record in records:
            if record.idempotency_key is not None:
                keyed.setdefault((record.idempotency_key, record.role), record)
        if not keyed:
            return records
        insert = postgres_insert if connection.dialect.name == "postgresql" else sqlite_insert
        k = idempotency_keys
        given = [
            {"key": key, "role": role, "fingerprint": record.fingerprint, "logged_at": now}
            for (key, role), record in keyed.items()
        ]
        new = {
            tuple(row)
            for row in connection.execute(
                insert(k)
                .values(given)
                .on_conflict_do_nothing(index_elements=["key", "role"])
                .returning(k.c.key, k.c.role)
            )
        }
        self._name_reused_keys(connection, records, new)
        first = {id(record) for key, record in keyed.items() if tuple(key) in new}
        return [r for r in records if r.idempotency_key is None or id(r) in first]

    def _name_reused_keys(self, connection: Connection, records: list[ForecastRecord], new: set) -> None:
        """A key already logged for a request with another body is a client's mistake (a key
        reused for a different request), not a retry: its forecasts are not logged either, but
        it is said, once per key, naming the key and the request."""
        k = idempotency_keys
        seen = [
            r for r in records if r.idempotency_key is not None and (r.idempotency_key, r.role) not in new
        ]
        if not seen:
            return
        stored = dict(
            connection.execute(
                select(k.c.key, k.c.fingerprint).where(k.c.key.in_({r.idempotency_key for r in seen}))
            ).all()
        )
        named = set()
        for record in seen:
            before = stored.get(record.idempotency_key)
            if record.idempotency_key in named or before is None or before == record.fingerprint:
                continue
            named.add(record.idempotency_key)
            log.warning(
                "Idempotency-Key %r was reused for a different request (%s): its forecasts are not logged, "
                "counted as duplicate; send a new key for each new request",
                record.idempotency_key,
                record.request_id,
            )

    def _count(self, outcome: str, forecasts: int) -> None:
        if not forecasts:
            return
        if outcome == "dropped":
            self.health.dropped += forecasts
        elif outcome == "abandoned":
            self.health.abandoned += forecasts
        self._counted[outcome].inc(forecasts)

    def _failed(self, records: list[ForecastRecord], exc: BaseException) -> None:
        count = sum(len(record.series_ids) for record in records)
        self.health.failed += count
        self._counted["failed"].inc(count)
        first_line = redact(f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        if database_error(exc):
            if self.health.error is None:
                log.error("the forecast log %s is failing: %s", self.shown_url, first_line)
            self.health.error = first_line
            self.metrics.up.set(0)
        else:  # the database works; this record does not fit it
            log.error(
                "the forecast log %s refused request %s's forecasts (%d): %s",
                self.shown_url,
                records[0].request_id,
                count,
                first_line,
            )

    def _prune_now_and_then(self, every_s: float = 600.0) -> None:
        """Retention, every ten minutes (monitoring/retention.py)."""
        if time.monotonic() - self._last_prune < every_s:
            return
        self._last_prune = time.monotonic()
        try:
            with self.database.begin() as connection:
                prune(connection, self.retention, self.max_steps, self.idempotency)
        except Exception as exc:
            log.error("the forecast log %s could not be pruned: %s", self.shown_url, redact(str(exc)))
