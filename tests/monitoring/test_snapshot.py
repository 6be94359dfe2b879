"""The monitor's gauges: computed by one process per refresh period for every process writing
the log, and never shown as current when they are not."""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import monitoring.snapshot as snapshot
from monitoring.actuals import ActualValues, store_actuals
from monitoring.collector import MonitorCollector
from monitoring.metrics import LogMetrics
from monitoring.records import utc_now
from monitoring.schema import monitor_snapshots
from monitoring.scoring import Thresholds
from monitoring.snapshot import SharedMonitor
from monitoring.writer import ForecastLog
from tests.monitoring.conftest import HOUR, START, metrics, record

REFRESH_S = 0.5


def worker(database) -> tuple[SharedMonitor, CollectorRegistry]:
    registry = CollectorRegistry()
    shared = SharedMonitor(database, Thresholds(min_steps=1), REFRESH_S, LogMetrics(registry))
    registry.register(MonitorCollector(shared))
    return shared, registry


def refreshes(shared: SharedMonitor) -> dict[str, float]:
    return {o: shared.metrics.refreshes.labels(o)._value.get() for o in ("computed", "shared", "failed")}


COUNT = {"role": "champion", "model": "m", "version": "1", "step": "all"}


def gauge(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float | None:
    return registry.get_sample_value(name, labels or {})


@pytest.fixture
def logged(database):
    ForecastLog(database, metrics()).write_batch([record("s")])
    store_actuals(
        database, ActualValues(["s"] * 4, START + np.arange(1, 5) * HOUR, np.ones(4)), frequency="h"
    )
    return database


def test_one_process_computes_per_period_and_the_others_read_it(logged):
    first, second = worker(logged)[0], worker(logged)[0]
    first.refresh(("m", "1"))
    second.refresh(("m", "1"))
    assert refreshes(first) == {"computed": 1, "shared": 0, "failed": 0}
    assert refreshes(second) == {"computed": 0, "shared": 1, "failed": 0}
    assert second.snapshot.document == first.snapshot.document
    assert second.snapshot.document["models"][0]["count"] == 4
    time.sleep(REFRESH_S)  # the next period: whoever comes first computes it
    second.refresh(("m", "1"))
    first.refresh(("m", "1"))
    assert refreshes(second)["computed"] == 1 and refreshes(first)["shared"] == 1
    assert first.health()["status"] == second.health()["status"] == "fresh"


def test_a_failed_refresh_is_counted_shown_and_marks_the_figures_stale(logged, monkeypatch):
    computing, registry = worker(logged)
    reading, other_registry = worker(logged)
    computing.refresh(("m", "1"))
    assert gauge(registry, "forecast_monitor_stale") == 0
    assert gauge(registry, "forecast_monitor_count", COUNT) == 4

    def broken(*args, **kwargs):
        raise RuntimeError("disk I/O error reading postgresql://u:secret@db/log")

    monkeypatch.setattr(snapshot, "monitor", broken)
    time.sleep(REFRESH_S)
    computing.refresh(("m", "1"))
    reading.refresh(("m", "1"))
    assert refreshes(computing)["failed"] == 1
    for shared, exposed in ((computing, registry), (reading, other_registry)):
        health = shared.health()
        assert health["status"] == "failing" and "disk I/O error" in health["error"]
        assert "secret" not in health["error"]
        assert gauge(exposed, "forecast_monitor_stale") == 1
    # the last figures are still exported, marked stale, with their age
    assert gauge(registry, "forecast_monitor_count", COUNT) == 4
    assert gauge(registry, "forecast_monitor_age_seconds") >= REFRESH_S


def test_figures_nobody_refreshed_for_two_and_a_half_periods_are_stale(logged):
    shared, registry = worker(logged)
    shared.refresh(("m", "1"))
    with logged.begin() as connection:  # computed long ago, and someone holds the claim
        connection.execute(
            monitor_snapshots.update().values(
                computed_at=utc_now() - timedelta(seconds=10 * REFRESH_S),
                claimed_until=utc_now() + timedelta(hours=1),
            )
        )
    shared.refresh(("m", "1"))
    assert refreshes(shared)["computed"] == 1  # the claim is held: nobody else computes
    assert shared.health()["status"] == "stale"
    assert gauge(registry, "forecast_monitor_stale") == 1
    assert b"forecast_monitor_status" in generate_latest(registry)


def test_an_unreachable_log_fails_the_refresh_and_keeps_the_last_figures_stale(logged, tmp_path):
    shared, registry = worker(logged)
    shared.refresh(("m", "1"))
    if logged.path is None:
        pytest.skip("the file check is SQLite's")
    logged.path.unlink()
    with pytest.raises(Exception, match="was deleted while the service ran"):
        shared.refresh(("m", "1"))
    assert shared.health()["status"] == "failing"
    assert gauge(registry, "forecast_monitor_stale") == 1
