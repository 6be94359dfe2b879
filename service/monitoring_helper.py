"""The monitoring routes' database work in a process of its own, beside each server process.

Why: storing a batch of actuals resolves thousands of forecast steps and reading the monitor
scores a window per version, both in pandas and numpy, holding Python's interpreter lock. In a
thread of the server process that took the lock from the event loop again and again: measured
with a client reading GET /v1/monitor once a second beside wrk at c32 (benchmarks/monitor_bench.py),
the predict p99 went from 43 to 61 ms, for 30-40 ms of computation a second. In a helper process
the server only waits for the answer. The server still checks the SQLite file's identity before
handing work over (monitoring.database), and the helper opens the log once, as its owner.

Without a helper (``PARSE_OFFLOAD_BYTES=0`` runs everything inline) the work runs in a thread."""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import Any

from infra.helper_process import HelperProcess
from monitoring.actuals import (
    ActualValues,
    Served,
    StoredActuals,
    StrayActuals,
    UnknownSeries,
    store_actuals,
)
from monitoring.database import LogDatabase, LogUnavailable, first_line
from monitoring.monitor import monitor
from monitoring.scoring import Thresholds


# -- what runs in the helper ------------------------------------------------------------------
@lru_cache(maxsize=4)
def database(url: str) -> LogDatabase:
    """The helper's own handle on the log, opened once."""
    return LogDatabase(url)


def read_monitor(
    url: str, thresholds: Thresholds, serving: tuple[str, str] | None, series_id: str | None = None
) -> dict[str, Any]:
    try:
        with database(url).connect() as connection:
            return monitor(connection, thresholds, serving, series_id)
    except Exception as exc:
        raise portable(exc) from None


def store(
    url: str,
    given: ActualValues,
    accept_unknown: bool,
    served: Served,
    named: int,
) -> StoredActuals:
    try:
        return store_actuals(
            database(url),
            given,
            accept_unknown,
            frequency=served.frequency,
            model=served.model,
            now=served.now,
            named=named,
        )
    except (UnknownSeries, StrayActuals):  # the request's own: answered as 422s
        raise
    except Exception as exc:
        raise portable(exc) from None


def portable(exc: Exception) -> Exception:
    """An error that crosses the process boundary intact: the first line of a database's own
    exception (its driver's objects do not pickle)."""
    return exc if isinstance(exc, LogUnavailable) else LogUnavailable(first_line(exc))


def warm() -> None:
    """Nothing: submitted at start, so the helper is spawned and has imported pandas and the
    monitor before the first request needs it (a cold start took 0.8 s)."""


# -- the server's side --------------------------------------------------------------------------
class MonitoringHelper:
    """One helper process (infra/helper_process.py); calls wait for it in a thread (``call``) or
    on the event loop (``run``). A helper that dies (killed, out of memory) is replaced and the
    call runs here instead. Disabled, every call runs in the caller's thread."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.helper = HelperProcess(warm)

    def start(self) -> None:
        if self.enabled:
            self.helper.start()

    def call(self, function: Any, *args: Any) -> Any:
        return self.helper.call(function, *args)

    async def run(self, function: Any, *args: Any) -> Any:
        return await asyncio.to_thread(self.call, function, *args)

    async def stop(self) -> None:
        await self.helper.stop()
