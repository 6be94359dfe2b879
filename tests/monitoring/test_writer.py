"""The writer: nothing handed to it is lost without being counted, a retry is logged once, and a
record the database refuses fails alone."""

from __future__ import annotations

import logging
import os
import socket
import time

import numpy as np
from sqlalchemy import func, select

from monitoring.actuals import ActualValues, store_actuals
from monitoring.database import LogDatabase
from monitoring.monitor import monitor
from monitoring.records import utc_now
from monitoring.retention import prune
from monitoring.schema import forecasts, idempotency_keys
from monitoring.scoring import Thresholds
from monitoring.writer import ForecastLog
from tests.monitoring.conftest import HOUR, START, metrics, record


def count(database, table=forecasts) -> int:
    with database.connect() as connection:
        return connection.execute(select(func.count()).select_from(table)).scalar_one()


def sample(log: ForecastLog, outcome: str) -> float:
    return log.metrics.records.labels(outcome)._value.get()


def test_waiting_for_the_writer_is_bounded_and_ignores_what_is_queued_later(tmp_path):
    """POST /v1/actuals waits for the forecasts queued before it, never longer than its bound:
    a writer that is stuck (here: never started) costs the caller the bound, not a hang."""
    log = ForecastLog(LogDatabase(f"sqlite:///{tmp_path / 'forecasts.db'}"), metrics(), wait_s=0.01)
    assert log.written_through(0.01)  # nothing queued yet
    log.submit(record())
    assert not log.written_through(0.2)
    log.start()
    assert log.written_through(5.0)
    assert log.health.written == 1
    assert log.stop()


def test_a_deleted_or_replaced_sqlite_file_is_reported_and_nothing_is_written_into_it(tmp_path):
    """SQLite writes on into a file deleted under it (the open descriptor keeps the old inode):
    the writer checks the file before each batch and fails instead, counted and shown."""
    path = tmp_path / "forecasts.db"
    log = ForecastLog(LogDatabase(f"sqlite:///{path}"), metrics(), wait_s=0.0)
    log.start()
    log.submit(record())
    assert log.flush()
    assert log.health.written == 1 and not log.health.failing
    os.remove(path)
    for n in range(5):
        log.submit(record(request_id=f"after-{n}"))
    assert log.flush()
    assert log.health.written == 1 and log.health.failed == 5
    assert "was deleted while the service ran" in log.health.error
    assert log.metrics.up._value.get() == 0
    path.write_bytes(b"")  # another file at the same path: still not the log it opened
    log.submit(record(request_id="replaced"))
    assert log.flush()
    assert log.health.failed == 6 and "replaced by another file" in log.health.error
    log.stop()


def test_shutdown_with_a_slow_database_counts_and_logs_what_it_could_not_write(caplog):
    """A database that accepts connections and never answers: the writer is stuck on its first
    batch when the drain budget runs out. What is still queued is counted as abandoned and said
    in one line, with the batch still in flight."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"postgresql://log:pw@127.0.0.1:{silent.getsockname()[1]}/forecasts"
        log = ForecastLog(LogDatabase(url), metrics(), batch=2, wait_s=0.0, drain_s=0.5)
        for n in range(10):
            log.submit(record(request_id=f"r{n}"))
        log.start()
        time.sleep(0.2)  # the writer takes its first batch and waits on the database
        with caplog.at_level(logging.ERROR, logger="monitoring.writer"):
            stopped = log.stop()
    assert not stopped
    assert log.health.abandoned == 8 and sample(log, "abandoned") == 8
    (line,) = [r.getMessage() for r in caplog.records if "did not drain" in r.getMessage()]
    assert "8 queued forecasts were not written" in line and "a batch of 2 forecasts" in line
    assert "pw" not in line


def test_a_record_the_database_refuses_fails_alone_not_its_batch(database, caplog):
    bad = record(request_id="bad")
    bad.future_times = [np.array(["NaT"] * 4, dtype="datetime64[us]")]  # no time to store it under
    log = ForecastLog(database, metrics())
    with caplog.at_level(logging.ERROR, logger="monitoring.writer"):
        log._write([record(request_id="a"), bad, record(request_id="b", first_target=2)])
    assert (log.health.written, log.health.failed) == (2, 1)
    assert not log.health.failing  # the database works: /readyz must not say it is failing
    assert count(database) == 2
    assert any("refused request bad's forecasts" in r.getMessage() for r in caplog.records)


def test_a_retried_request_is_logged_once_per_idempotency_key(database):
    log = ForecastLog(database, metrics())
    log.write_batch(
        [record(key="k1"), record(key="k1"), record(key="k2", first_target=2), record(first_target=3)]
    )
    log.write_batch([record(key="k1"), record(key="k1", role="challenger")])
    assert count(database) == 4  # k1, k2, the unkeyed one, and k1's challenger forecast
    assert (log.health.written, log.health.duplicates) == (4, 2)
    assert sample(log, "duplicate") == 2


def test_idempotency_keys_are_forgotten_after_their_period(database):
    from datetime import timedelta

    log = ForecastLog(database, metrics())
    log.write_batch([record(key="old")])
    with database.begin() as connection:
        connection.execute(idempotency_keys.update().values(logged_at=utc_now() - timedelta(days=2)))
        prune(connection, timedelta(days=90), 10**9, timedelta(hours=24))
    assert count(database, idempotency_keys) == 0
    log.write_batch([record(key="old", first_target=2)])  # a key reused after its period: a new request
    assert count(database) == 2


def test_the_same_forecast_sent_again_without_a_key_is_stored_once_and_resolved_once(database):
    """Two requests for the same series from the same origin, by the same model version, with the
    same values, without an Idempotency-Key (a client's retry that sent none): stored twice, each actual counted twice
    in the monitor. The repeat is counted as a duplicate; another origin, version or role is a
    forecast of its own."""
    log = ForecastLog(database, metrics())
    log.write_batch([record("s", 1, request_id="a"), record("s", 1, request_id="b")])  # in one batch
    log.write_batch([record("s", 1, request_id="c")])  # and in a later one
    log.write_batch([record("s", 2), record("s", 1, version="2"), record("s", 1, role="challenger")])
    assert count(database) == 4
    assert (log.health.written, log.health.duplicates) == (4, 2)
    assert sample(log, "duplicate") == 2
    times = START + np.arange(1, 3) * HOUR
    stored = store_actuals(database, ActualValues(["s", "s"], times, np.array([1.0, 2.0])), frequency="h")
    assert (
        stored.resolved_steps == 2 + 1 + 2 + 2
    )  # hours 1-2 of origin 0 (each version, role), hour 2 of origin 1
    with database.connect() as connection:
        document = monitor(connection, Thresholds(min_steps=1))
    assert {(m["role"], m["version"]): m["count"] for m in document["models"]} == {
        ("champion", "1"): 3,
        ("champion", "2"): 2,
        ("challenger", "1"): 2,
    }


def test_a_forecast_from_the_same_origin_with_other_values_is_stored(database):
    """Made again from other inputs (a corrected history, other future covariates), a forecast
    from the same origin by the same version is a forecast of its own: only the same values are
    a repeat. The log dropped it, and its values were never scored."""
    log = ForecastLog(database, metrics())
    corrected = np.array([5.0, 6.0, 7.0, 8.0])
    log.write_batch([record("s", 1, request_id="a"), record("s", 1, request_id="b", mean=corrected)])
    log.write_batch([record("s", 1, request_id="c", mean=corrected)])  # its repeat: a duplicate
    assert count(database) == 2
    assert (log.health.written, log.health.duplicates) == (2, 1)
    with database.connect() as connection:
        stored = connection.execute(select(forecasts.c.request_id).order_by(forecasts.c.id)).scalars().all()
    assert stored == ["a", "b"]


def test_the_same_forecast_from_a_batch_of_another_size_is_a_duplicate(database):
    """The service batches concurrent requests into one forward pass, and a row's output differs
    by ~1e-7 relative between batch sizes: a retry landing in another batch was stored twice
    (bytes differ), and its actuals counted twice. Within float32's precision it is the same
    forecast; 1e-3 apart it is another one. A value at 0 in a series far from it compares on
    the series' scale, not its own."""
    log = ForecastLog(database, metrics())
    level = np.array([1000.0, 0.0, -250.0, 12.5])
    log.write_batch([record("s", 1, request_id="a", mean=level)])
    log.write_batch([record("s", 1, request_id="b", mean=level * (1 + 1e-7) + [0, 3e-5, 0, 0])])
    assert (log.health.written, log.health.duplicates) == (1, 1)
    log.write_batch([record("s", 1, request_id="c", mean=level * (1 + 1e-3))])
    assert (log.health.written, log.health.duplicates) == (2, 1)
    with database.connect() as connection:
        stored = connection.execute(select(forecasts.c.request_id).order_by(forecasts.c.id)).scalars().all()
    assert stored == ["a", "c"]


def test_a_key_reused_for_another_request_is_said_not_silently_dropped(database, caplog):
    log = ForecastLog(database, metrics())
    first, retry, other = record(key="k1"), record(key="k1"), record("sydney", key="k1", request_id="other")
    first.fingerprint = retry.fingerprint = "body-a"
    other.fingerprint = "body-b"
    log.write_batch([first])
    with caplog.at_level(logging.WARNING, logger="monitoring.writer"):
        log.write_batch([retry])
        assert not caplog.records  # a retry: nothing to say
        log.write_batch([other])
    (line,) = [r.getMessage() for r in caplog.records]
    assert "'k1' was reused for a different request (other)" in line
    assert count(database) == 1 and log.health.duplicates == 2
