"""A fresh forecast log per test (``log_url``, tests/conftest.py: SQLite, and PostgreSQL with one
server per session and a new database per test), and records shaped as the predict handler hands
them over."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from monitoring.database import LogDatabase
from monitoring.metrics import LogMetrics
from monitoring.records import ForecastRecord

HOUR = np.timedelta64(1, "h")
START = np.datetime64("2024-01-01T00:00", "us")


@pytest.fixture
def database(log_url) -> Iterator[LogDatabase]:
    """The log at ``log_url``, migrated as the service opens it."""
    opened = LogDatabase(log_url)
    opened.prepare()
    yield opened
    opened.dispose()


def metrics() -> LogMetrics:
    return LogMetrics(CollectorRegistry())


def record(
    series_id: str = "s",
    first_target: int = 1,
    horizon: int = 4,
    version: str = "1",
    role: str = "champion",
    mean: np.ndarray | None = None,
    key: str | None = None,
    request_id: str = "r",
) -> ForecastRecord:
    """One hourly forecast of ``horizon`` steps, its first target ``first_target`` hours after
    START, from a 48-step window (so its naive forecast is 47 + the shift and it has a season)."""
    targets = START + (first_target + np.arange(horizon)) * HOUR
    return ForecastRecord(
        request_id, role, "m", version, "champion", "h", [series_id], np.arange(48.0)[None, :],
        [targets], np.arange(float(horizon))[None, :] if mean is None else mean[None, :], {}, [],
        idempotency_key=key,
    )  # fmt: skip


def assert_same_document(got, expected, rel: float = 1e-12, where: str = "document") -> None:
    """Equal, floats to ``rel``: dicts by key, lists item by item."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), (where, got, expected)
        for key in expected:
            assert_same_document(got[key], expected[key], rel, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), (where, got, expected)
        for k, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same_document(a, b, rel, f"{where}[{k}]")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=rel, abs=1e-300), where
    else:
        assert got == expected, where
