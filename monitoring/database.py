"""Opening the forecast log's database: as its owner (the service: migrated to the current layout
on first use, its SQLite file's identity checked before every write) or as a reader (the CLI:
never creates or changes anything; a missing or foreign database is an error naming the URL).

Why the identity check: SQLite keeps writing into a file that was deleted or replaced under a
running process (the open descriptor still points at the old inode), so every forecast and actual
written after it would be lost without a word. The owner remembers the file's (device, inode)
once migrated and refuses to write when the path no longer leads to it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from forecaster.errors import ForecasterError
from infra.database_urls import sqlalchemy_url, sqlite_file
from infra.redaction import redact

VERSION_TABLE = "forecast_log_version"  # not alembic_version: the log may share MLflow's database
MIGRATIONS = "monitoring:migrations"
BUSY_TIMEOUT_S = 30.0
MIGRATION_LOCK = 0x464C4F47  # pg_advisory_xact_lock key ("FLOG"): one migrating process at a time

# The layouts earlier versions created without a version table, recognised by their columns, and
# the revision each one is (monitoring/migrations/versions): such a log is stamped, then migrated.
FIRST_LAYOUT = {  # 0001: one row per forecast step
    "forecast_steps": {"id", "request_id", "series_id", "role", "model_name", "model_version", "model_alias",
                       "origin", "step", "target_time", "forecast", "lower", "upper", "level", "naive",
                       "seasonal_naive", "scale", "logged_at"},
    "actuals": {"series_id", "time", "value", "received_at"},
}  # fmt: skip
SECOND_LAYOUT = {  # 0002: one row per forecast, its steps as binary arrays
    "forecasts": {"id", "request_id", "series_id", "role", "model_name", "model_version", "model_alias",
                  "origin", "last_target", "horizon", "level", "scale", "logged_at", "target_times",
                  "forecast", "lower", "upper", "naive", "seasonal_naive"},
    "actuals": FIRST_LAYOUT["actuals"],
}  # fmt: skip
UNVERSIONED = {"0001": FIRST_LAYOUT, "0002": SECOND_LAYOUT}
LOG_TABLES = {"forecast_steps", "forecasts", "actuals", "resolved_steps", "monitored_versions",
              "idempotency_keys", "monitor_snapshots"}  # fmt: skip


class LogUnavailable(ForecasterError):
    """The forecast log cannot be used as asked; the message names the URL (redacted) and what to do."""


def log_engine(url: str, writer: bool = True, timeout_s: float = 5.0) -> Engine:
    """An engine for the log. SQLite gets a busy timeout and, for the owner, WAL (the writer
    thread and readers do not block each other); PostgreSQL a short connect timeout, so an
    unreachable server fails a batch in seconds instead of hanging the writer."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": timeout_s, "check_same_thread": False})
        if writer:

            @event.listens_for(engine, "connect")
            def _wal(connection, _record) -> None:
                cursor = connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.close()

        return engine
    parsed = sqlalchemy_url(url)
    connect_args = {"connect_timeout": 3} if parsed.drivername.startswith("postgresql") else {}
    return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)


def file_identity(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def first_line(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}".splitlines()[0][:300]) or ""


# -- migrations ---------------------------------------------------------------------------------
def alembic_config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config(None)).get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(
        connection, opts={"version_table": VERSION_TABLE}
    ).get_current_revision()


def migration_engine(url: str, timeout_s: float) -> Engine:
    """An engine whose transactions hold the database while they migrate: SQLite's BEGIN IMMEDIATE
    (pysqlite left to itself runs DDL outside any transaction), PostgreSQL an advisory lock (taken
    in ``upgrade``). A second process starting at once waits, then finds the log migrated."""
    engine = log_engine(url, writer=True, timeout_s=timeout_s)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _manual(connection, _record) -> None:
            connection.isolation_level = None  # no implicit transactions: ours below

        @event.listens_for(engine, "begin")
        def _immediate(connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def upgrade(url: str, timeout_s: float = 600.0, to: str = "head") -> str:
    """Bring the log at ``url`` to the current layout (or revision ``to``) in one transaction
    (creating it when the database is empty) and return the revision. A log of an earlier,
    unversioned layout is recognised and migrated; any other raises LogUnavailable, untouched.

    SQLite can answer "database is locked" without waiting its busy timeout while another
    process turns a new file to WAL (seen once in a full test run: two services starting at once): the
    whole transaction is tried again until ``timeout_s``; it finds the log migrated or migrates it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return upgrade_once(url, timeout_s, to)
        except OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# Alembic runs a migration through its module-level `alembic.context` (migrations/env.py reads the
# connection from it), so two migrations in one process at once, even of two different logs, run
# on each other's connections and fail ("not an error", half-made tables): seen in a full test run,
# a service's writer migrating its log while the one before it still migrated another. Processes
# are kept apart by the database (the transaction below); threads of one process by this lock.
ALEMBIC_COMMANDS = threading.Lock()


def upgrade_once(url: str, timeout_s: float, to: str) -> str:
    engine = migration_engine(url, timeout_s)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            config = alembic_config(connection)
            with ALEMBIC_COMMANDS:
                if current_revision(connection) is None:
                    unversioned = recognise_unversioned(connection, redact(url) or "")
                    if unversioned is not None:
                        command.stamp(config, unversioned)
                command.upgrade(config, to)
            return current_revision(connection) or ""
    finally:
        engine.dispose()


def recognise_unversioned(connection: Connection, shown_url: str) -> str | None:
    """The revision an unversioned log is at: None for a database without any of the log's
    tables (migrated from the start), a revision for a layout of an earlier version. Anything else
    is not a log this code can read: LogUnavailable, naming what was found."""
    inspector = inspect(connection)
    present = set(inspector.get_table_names()) & LOG_TABLES
    if not present:
        return None
    for revision, layout in UNVERSIONED.items():
        if present != set(layout):
            continue
        columns = {table: {c["name"] for c in inspector.get_columns(table)} for table in layout}
        if all(layout[table] <= columns[table] for table in layout):
            return revision
    found = []
    for table in sorted(present):
        present_columns = {c["name"] for c in inspector.get_columns(table)}
        expected = next((layout[table] for layout in UNVERSIONED.values() if table in layout), set())
        missing = sorted(expected - present_columns)
        found.append(f"{table}" + (f" without {', '.join(missing)}" if missing else ""))
    raise LogUnavailable(
        f"the forecast log {shown_url} has tables of no layout this service knows ({'; '.join(found)}): "
        "point FORECAST_LOG_URL at a new database, or move those tables away"
    )


# -- the owner ----------------------------------------------------------------------------------
class LogDatabase:
    """The forecast log's database as the service owns it. Creating one touches nothing: the
    first ``begin``/``connect`` migrates it (once per process), so an unreachable database shows
    in /readyz and the counters instead of stopping the start."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown_url = redact(url) or ""
        # SQLite: wait up to 30 s for the write lock (a large actuals batch holds it for seconds;
        # a writer giving up after 5 s lost its batch)
        self.engine = log_engine(url, writer=True, timeout_s=BUSY_TIMEOUT_S)
        self.path = sqlite_file(url)
        self.identity: tuple[int, int] | None = None
        self.prepared = False
        self._preparing = threading.Lock()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def prepare(self) -> None:
        """Migrate the log to the current layout (once per process) and remember its file."""
        if self.prepared:
            return
        with self._preparing:
            if self.prepared:
                return
            upgrade(self.url)
            self.identity = file_identity(self.path)
            self.prepared = True

    def check_file(self) -> None:
        """The SQLite file migrated at start is still the one at its path (nothing for PostgreSQL)."""
        if self.path is None or not self.prepared:
            return
        now = file_identity(self.path)
        if now == self.identity:
            return
        what = "deleted" if now is None else "replaced by another file"
        raise LogUnavailable(
            f"the forecast log file {self.path} was {what} while the service ran: nothing more is "
            "written to it; restart the service to open the log at that path again"
        )

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction on the checked, migrated log."""
        self.prepare()
        self.check_file()
        with self.engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        self.prepare()
        self.check_file()
        with self.engine.connect() as connection:
            yield connection

    def dispose(self) -> None:
        self.engine.dispose()


# -- readers ------------------------------------------------------------------------------------
def open_for_reading(url: str) -> Engine:
    """An engine on an existing log at the current layout, for the CLI's reports. Creates
    nothing: SQLite would make a new empty file of a mistyped path, and a monitor reading it would
    report "insufficient data" instead of the mistake."""
    shown = redact(url) or ""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise LogUnavailable(f"no forecast log at {shown}: the file {path} does not exist")
    engine = log_engine(url, writer=False)
    try:
        with engine.connect() as connection:
            revision = current_revision(connection)
            unversioned = recognise_unversioned(connection, shown) if revision is None else None
    except SQLAlchemyError as exc:
        engine.dispose()
        raise LogUnavailable(f"cannot read the forecast log {shown}: {first_line(exc)}") from None
    except LogUnavailable:
        engine.dispose()
        raise
    head = head_revision()
    if revision == head:
        return engine
    engine.dispose()
    if revision is None and unversioned is None:
        raise LogUnavailable(f"{shown} holds no forecast log (no {VERSION_TABLE} table): check the URL")
    at = revision or f"the unversioned layout {unversioned}"
    raise LogUnavailable(
        f"the forecast log {shown} is at {at}, this version reads {head}: the service upgrades it when "
        "it starts, or run `forecast upgrade-log`"
    )
