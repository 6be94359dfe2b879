"""The monitor's gauges, computed once per refresh period for everyone writing the same log.

Every worker of every replica refreshes its gauges every MONITOR_REFRESH_S; only one of them
computes the document: the one whose conditional UPDATE claims the row of ``monitor_snapshots``
(the served model and thresholds) once it is older than the period, by the database's own clock
(on PostgreSQL, so machines with skewed clocks agree). The others read what it wrote. A refresh
that fails is counted (``forecast_monitor_refreshes_total{outcome="failed"}``), its error stored
for every worker to see, and the figures are marked stale: /readyz says so, and the collector
exports ``forecast_monitor_stale 1`` and the snapshot's age beside them, so a dashboard never
shows an old ``ok`` as if it were current."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from monitoring.database import LogDatabase, first_line
from monitoring.metrics import LogMetrics
from monitoring.monitor import monitor
from monitoring.records import utc_now
from monitoring.schema import monitor_snapshots
from monitoring.scoring import Thresholds

CLAIM_S = 60.0  # a worker that claimed the computation and died frees it after this (plus a period)
STALE_PERIODS = 2.5  # figures older than this many refresh periods are stale: the refreshes stopped


@dataclass
class Snapshot:
    """The shared document as one worker last read it."""

    document: dict[str, Any] | None
    computed_at: datetime | None
    error: str | None
    age_s: float | None  # at the moment it was read, by the database's clock
    read_at: float  # time.monotonic() of that moment
    stale: bool

    def age_now(self) -> float | None:
        return None if self.age_s is None else self.age_s + time.monotonic() - self.read_at


def snapshot_key(serving: tuple[str, str] | None, thresholds: Thresholds) -> str:
    model = "latest" if serving is None else f"{serving[0]}/{serving[1]}"
    t = thresholds
    return f"{model}|{t.window}|{t.min_steps}|{t.min_skill:g}|{t.coverage_tolerance:g}"[:400]


def database_now(connection: Connection) -> datetime:
    """The database's clock, UTC (SQLite is a file on this machine: its clock is ours)."""
    if connection.dialect.name == "postgresql":
        return connection.execute(text("SELECT timezone('UTC', now())")).scalar_one()
    return utc_now()


class SharedMonitor:
    """Refreshes one worker's view of the shared monitor document."""

    def __init__(
        self,
        database: LogDatabase,
        thresholds: Thresholds,
        refresh_s: float,
        metrics: LogMetrics,
        compute: Callable[[tuple[str, str] | None], dict[str, Any]] | None = None,
    ) -> None:
        """``compute(serving)`` makes the document (default: here, from ``database``; the service
        hands it to its monitoring helper process)."""
        self.database, self.thresholds, self.refresh_s, self.metrics = (
            database,
            thresholds,
            refresh_s,
            metrics,
        )
        self.worker = f"{socket.gethostname()}:{os.getpid()}"[:200]
        self.snapshot: Snapshot | None = None
        self.error: str | None = None  # this worker's last failure to refresh, None after a success
        self.compute = compute or self.compute_here

    def compute_here(self, serving: tuple[str, str] | None) -> dict[str, Any]:
        with self.database.connect() as connection:
            return monitor(connection, self.thresholds, serving)

    def refresh(self, serving: tuple[str, str] | None) -> Snapshot:
        """Compute the document if it is this worker's turn, then read the shared one."""
        key = snapshot_key(serving, self.thresholds)
        try:
            computed = self._claim(key) and self._compute(key, serving)
            snapshot = self._read(key)
            if not computed and snapshot.error is None and snapshot.computed_at is not None:
                self.metrics.refreshes.labels("shared").inc()
        except Exception as exc:
            self.error = first_line(exc)
            self.metrics.refreshes.labels("failed").inc()
            if self.snapshot is not None:
                self.snapshot.stale = True
            raise
        self.error = None
        self.snapshot = snapshot
        return snapshot

    def _claim(self, key: str) -> bool:
        s = monitor_snapshots
        with self.database.begin() as connection:
            insert = postgres_insert if connection.dialect.name == "postgresql" else sqlite_insert
            connection.execute(insert(s).values(key=key).on_conflict_do_nothing(index_elements=["key"]))
            now = database_now(connection)
            due = now - timedelta(seconds=self.refresh_s * 0.8)  # ticks drift: a little early is on time
            claimed = connection.execute(
                update(s)
                .where(
                    s.c.key == key,
                    or_(s.c.computed_at.is_(None), s.c.computed_at <= due),
                    or_(s.c.claimed_until.is_(None), s.c.claimed_until < now),
                )
                .values(
                    claimed_until=now + timedelta(seconds=CLAIM_S + self.refresh_s), claimed_by=self.worker
                )
            )
            return claimed.rowcount == 1

    def _compute(self, key: str, serving: tuple[str, str] | None) -> bool:
        """Compute and store the document (True), or store why it could not be (False)."""
        s = monitor_snapshots
        try:
            document = self.compute(serving)
        except Exception as exc:
            with self.database.begin() as connection:
                connection.execute(
                    update(s)
                    .where(s.c.key == key)
                    .values(error=first_line(exc), error_at=database_now(connection), claimed_until=None)
                )
            self.metrics.refreshes.labels("failed").inc()
            return False
        with self.database.begin() as connection:
            connection.execute(
                update(s)
                .where(s.c.key == key)
                .values(
                    document=json.dumps(document),
                    computed_at=database_now(connection),
                    claimed_until=None,
                    error=None,
                    error_at=None,
                )
            )
        self.metrics.refreshes.labels("computed").inc()
        return True

    def _read(self, key: str) -> Snapshot:
        s = monitor_snapshots
        with self.database.connect() as connection:
            row = connection.execute(
                select(s.c.document, s.c.computed_at, s.c.error).where(s.c.key == key)
            ).one()
            now = database_now(connection)
        document = None if row.document is None else json.loads(row.document)
        age = None if row.computed_at is None else (now - row.computed_at).total_seconds()
        stale = row.error is not None or age is None or age > STALE_PERIODS * self.refresh_s
        return Snapshot(document, row.computed_at, row.error, age, time.monotonic(), stale)

    def health(self) -> dict[str, Any]:
        """For /readyz: fresh, stale or failing, with the age and the error."""
        snapshot = self.snapshot
        if snapshot is None and self.error is None:
            return {"status": "pending"}
        age = None if snapshot is None else snapshot.age_now()
        error = self.error or (snapshot.error if snapshot else None)
        status = "failing" if error else "stale" if snapshot is None or snapshot.stale else "fresh"
        return {
            "status": status,
            "computed_at": None if snapshot is None or snapshot.computed_at is None
            else snapshot.computed_at.isoformat(),
            "age_s": None if age is None else round(age, 1),
            "error": error,
        }  # fmt: skip
