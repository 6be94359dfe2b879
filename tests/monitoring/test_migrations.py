"""The log's layout is Alembic's: a new log is migrated to it, a log of each earlier layout is
migrated with its data (resolved steps included), anything else is refused and left alone, and a
reader never creates or changes a thing."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import DateTime, column, create_engine, inspect, select, table, text

from monitoring.actuals import ActualValues, store_actuals
from monitoring.database import (
    VERSION_TABLE,
    LogDatabase,
    LogUnavailable,
    head_revision,
    open_for_reading,
    upgrade,
)
from monitoring.monitor import monitor
from monitoring.records import FORECAST_COLUMNS, batch_rows, expand_steps, records_frame, utc_now
from monitoring.schema import actuals, forecasts, metadata, resolved_steps
from monitoring.scoring import Thresholds
from monitoring.writer import ForecastLog
from tests.monitoring.conftest import HOUR, START, assert_same_document, metrics, record


def engine_of(url: str):
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def tables_and_rows(url: str) -> dict[str, tuple[list[str], int]]:
    engine = engine_of(url)
    inspector = inspect(engine)
    with engine.connect() as connection:
        found = {
            table: (
                [c["name"] for c in inspector.get_columns(table)],
                connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one(),
            )
            for table in inspector.get_table_names()
        }
    engine.dispose()
    return found


def test_a_new_log_is_migrated_to_exactly_the_tables_the_code_reads(log_url):
    assert upgrade(log_url) == head_revision()
    engine = engine_of(log_url)
    dialect = engine.dialect.name

    def created_here(item, name, kind, reflected, compare_to) -> bool:
        # indexes declared for PostgreSQL only (the BRIN one) are not made on SQLite
        ddl_if = getattr(item, "_ddl_if", None)
        return ddl_if is None or ddl_if.dialect in (None, dialect)

    with engine.connect() as connection:
        options = {"version_table": VERSION_TABLE, "include_object": created_here}
        differences = compare_metadata(MigrationContext.configure(connection, opts=options), metadata)
    engine.dispose()
    assert differences == []
    assert upgrade(log_url) == head_revision()  # again: nothing to do


def some_log(database) -> None:
    """Forecasts of two series and two versions, and actuals resolving some of their steps."""
    log = ForecastLog(database, metrics())
    for i in range(12):
        log.write_batch([record(f"s{i % 2}", 1 + i // 2, version=str(1 + i // 6), mean=np.arange(4.0) * i)])
    for series_id in ("s0", "s1"):
        times = START + np.arange(0, 9) * HOUR
        given = ActualValues([series_id] * 9, times, np.sin(np.arange(9.0)))
        store_actuals(database, given, frequency="h")  # hour 0 (before every forecast) as well


def figures_of(url: str) -> dict:
    engine = open_for_reading(url)
    with engine.connect() as connection:
        document = monitor(connection, Thresholds(min_steps=1))
    engine.dispose()
    return document


def forecasts_of(url: str) -> pd.DataFrame:
    engine = engine_of(url)
    with engine.connect() as connection:
        logged = connection.execute(select(forecasts).order_by(forecasts.c.id))
        frame = records_frame(logged.all(), list(logged.keys()))
    engine.dispose()
    return frame.drop(columns=["logged_at"])


def test_a_log_of_the_second_layout_is_migrated_with_its_steps_resolved(log_url):
    """A log the previous version wrote (forecasts and actuals, no version table): stamped,
    migrated, its resolved steps backfilled, so the monitor reads what it always showed."""
    database = LogDatabase(log_url)
    database.prepare()
    some_log(database)
    database.dispose()
    expected, logged = figures_of(log_url), forecasts_of(log_url)
    engine = engine_of(log_url)
    with engine.begin() as connection:  # back to what the previous version left
        for table in (
            "resolved_steps",
            "monitored_versions",
            "idempotency_keys",
            "monitor_snapshots",
            VERSION_TABLE,
        ):
            connection.execute(text(f"DROP TABLE {table}"))
    engine.dispose()
    assert set(tables_and_rows(log_url)) == {"forecasts", "actuals"}
    with pytest.raises(LogUnavailable, match="the unversioned layout 0002.*forecast upgrade-log"):
        open_for_reading(log_url)  # a reader changes nothing, and says how to migrate
    assert upgrade(log_url) == head_revision()
    assert_same_document(figures_of(log_url), expected)
    pd.testing.assert_frame_equal(forecasts_of(log_url), logged)


def test_a_log_of_the_first_layout_is_regrouped_a_row_per_forecast(log_url):
    """The first layout kept a row per step. Its forecasts come back one row each, in id order,
    every value in place, and resolved against its actuals."""
    upgrade(log_url, to="0001")
    records = [record(f"s{i % 2}", 1 + i // 2, mean=np.arange(4.0) * i, request_id=f"r{i}") for i in range(6)]
    engine = engine_of(log_url)
    dialect = engine.dialect.name
    frame = records_frame(batch_rows(records, utc_now(), dialect), list(FORECAST_COLUMNS))
    frame.insert(0, "id", range(1, len(frame) + 1))
    for name in ("origin", "last_target", "logged_at"):
        frame[name] = pd.to_datetime(frame[name])
    steps = expand_steps(frame).drop(columns=["id", "last_target", "horizon"])
    steps = steps.rename(columns={"target_times": "target_time"})
    with engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {VERSION_TABLE}"))  # as the first version left it
        step_table = inspect(connection).get_columns("forecast_steps")
        names = [c["name"] for c in step_table if c["name"] != "id"]
        rows = [{name: plain(value) for name, value in zip(names, row, strict=True)}
                for row in steps[names].itertuples(index=False)]  # fmt: skip
        typed = table(
            "forecast_steps", *(column(name, DateTime if name in TIMES else None) for name in names)
        )
        connection.execute(typed.insert(), rows)
        times = START + np.arange(0, 6) * HOUR
        connection.execute(
            actuals.insert(),
            [{"series_id": s, "time": t.astype("datetime64[us]").item(), "value": float(k), "received_at": utc_now()}
             for s in ("s0", "s1") for k, t in enumerate(times)],
        )  # fmt: skip
    engine.dispose()
    assert upgrade(log_url) == head_revision()
    regrouped = forecasts_of(log_url)
    assert regrouped["request_id"].tolist() == [f"r{i}" for i in range(6)]
    assert regrouped["id"].tolist() == [1, 5, 9, 13, 17, 21]  # each keeps its first step's id
    original = frame.drop(columns=["id", "logged_at"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(regrouped.drop(columns=["id"]), original, check_dtype=False)
    # the actuals (hours 0-5) resolve the steps of hours 1-4, 2-5 of the first four forecasts and
    # 3-5 of the last two
    assert figures_of(log_url)["models"][0]["count"] == 4 + 4 + 4 + 4 + 3 + 3


TIMES = {"origin", "target_time", "logged_at"}


def plain(value):
    """A frame's value as the driver takes it: datetimes, floats, None for NaN."""
    if isinstance(value, pd.Timestamp | np.datetime64):
        return pd.Timestamp(value).to_pydatetime()
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else float(value)
    return value.item() if isinstance(value, np.generic) else value


EARLIER_LAYOUTS = {  # tables no released version made -> refused by name, left as they are
    "step rows without their columns": (
        "CREATE TABLE forecast_steps (id INTEGER PRIMARY KEY, series_id VARCHAR(200), step INTEGER)",
        "INSERT INTO forecast_steps VALUES (1, 's', 1)",
    ),
    "keyed step rows beside a forecasts table": (
        "CREATE TABLE forecasts (id INTEGER PRIMARY KEY, request_id VARCHAR(32), series_id VARCHAR(200), "
        "horizon INTEGER)",
        "INSERT INTO forecasts VALUES (1, 'r', 's', 1)",
        "CREATE TABLE forecast_steps (forecast_id INTEGER, step INTEGER, target_time TIMESTAMP, "
        "forecast FLOAT, PRIMARY KEY (forecast_id, step))",
        "INSERT INTO forecast_steps (forecast_id, step) VALUES (1, 1)",
    ),
    "a forecasts table without step arrays": (
        "CREATE TABLE forecasts (id INTEGER PRIMARY KEY, request_id VARCHAR(32), horizon INTEGER)",
        "INSERT INTO forecasts VALUES (1, 'r', 1)",
    ),
}


@pytest.mark.parametrize("layout", EARLIER_LAYOUTS)
def test_a_log_of_no_known_layout_is_refused_by_name_and_left_as_it_was(log_url, layout):
    engine = engine_of(log_url)
    with engine.begin() as connection:
        for statement in EARLIER_LAYOUTS[layout]:
            connection.exec_driver_sql(statement)
    engine.dispose()
    before = tables_and_rows(log_url)
    with pytest.raises(LogUnavailable, match="tables of no layout this service knows") as refused:
        LogDatabase(log_url).prepare()
    assert "FORECAST_LOG_URL" in str(refused.value)
    assert tables_and_rows(log_url) == before


def test_a_reader_never_creates_a_log(tmp_path, log_url):
    missing = f"sqlite:///{tmp_path / 'typo.db'}"
    with pytest.raises(
        LogUnavailable, match=r"no forecast log at sqlite:///.*typo.db: the file .* does not exist"
    ):
        open_for_reading(missing)
    assert not (tmp_path / "typo.db").exists()
    if log_url.startswith("postgresql"):  # an existing database without a log in it
        with pytest.raises(LogUnavailable, match="holds no forecast log"):
            open_for_reading(log_url)
        assert tables_and_rows(log_url) == {}


def test_two_services_starting_at_once_migrate_one_after_the_other(log_url):
    code = "import sys; from monitoring.database import upgrade; print(upgrade(sys.argv[1]))"
    starts = [subprocess.Popen([sys.executable, "-c", code, log_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]  # fmt: skip
    outputs = [start.communicate(timeout=120) for start in starts]
    assert [start.returncode for start in starts] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == [head_revision()] * 2


def test_logs_migrated_by_threads_of_one_process_at_once_are_each_migrated(tmp_path):
    """Alembic runs a migration through its module-level context: without the lock, threads
    migrating different logs at once ran on each other's connections and failed (every round of
    three did, before the lock)."""
    for round_ in range(3):
        urls = [f"sqlite:///{tmp_path / f'log-{round_}-{i}.db'}" for i in range(3)]
        with ThreadPoolExecutor(len(urls)) as pool:
            revisions = list(pool.map(upgrade, urls))  # raises what a thread raised
        assert revisions == [head_revision()] * len(urls)
        for url in urls:
            engine = create_engine(url)
            try:
                assert set(inspect(engine).get_table_names()) >= {"forecasts", "actuals", VERSION_TABLE}
            finally:
                engine.dispose()


def test_retention_deletes_old_forecasts_with_their_resolved_steps(database):
    from monitoring.retention import prune

    log = ForecastLog(database, metrics())
    for i in range(4):
        log.write_batch([record("s", 1 + i)])
    store_actuals(
        database, ActualValues(["s"] * 7, START + np.arange(1, 8) * HOUR, np.ones(7)), frequency="h"
    )
    with database.begin() as connection:
        connection.execute(
            forecasts.update().where(forecasts.c.id <= 2).values(logged_at=utc_now() - timedelta(days=100))
        )
        prune(connection, timedelta(days=90), 10**9, timedelta(hours=24))
    with database.connect() as connection:
        kept = connection.execute(select(resolved_steps.c.forecast_id).distinct()).scalars().all()
    assert sorted(kept) == [3, 4]
