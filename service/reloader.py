"""Keeps the served model current without ever blocking start-up or a caller for long.

- At start the port opens at once; a background task loads the model, retrying with exponential
  backoff (1 s doubling up to ``retry_max`` s, with jitter) until it succeeds: meanwhile /readyz
  says 503 and why.
- Once loaded, it re-resolves the URI every ``interval`` seconds (0: never), so a moved alias
  rolls out without a restart; failures keep the current model serving and mark it stale.
- ``reload_now`` (the admin endpoint) answers within ``timeout`` seconds whatever the registry
  does: the load goes on in its thread and still swaps in if it succeeds later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

from service.metrics import LoadMetrics
from service.model_store import ModelStore

log = logging.getLogger("service.reloader")


def _settle(attempt: asyncio.Future) -> None:
    """Take an abandoned attempt's outcome. Unretrieved, asyncio logs its exception with the
    traceback when the task is collected, and MLflow's text quotes the tracking URI's password."""
    if not attempt.cancelled():
        attempt.exception()


class Reloader:
    def __init__(
        self,
        store: ModelStore,
        metrics: LoadMetrics,
        interval: float,
        timeout: float,
        retry_max: float = 30.0,
    ) -> None:
        self.store, self.metrics = store, metrics
        self.interval, self.timeout, self.retry_max = interval, timeout, retry_max
        self.task: asyncio.Task | None = None

    async def reload_now(self) -> tuple[bool, str]:
        """Resolve and, if the URI points elsewhere, load and swap; raises on failure or after
        ``timeout`` seconds (TimeoutError)."""
        attempt = asyncio.ensure_future(asyncio.to_thread(self.store.refresh))
        try:
            changed, message = await asyncio.wait_for(asyncio.shield(attempt), self.timeout)
        except asyncio.CancelledError:  # shutdown: the thread runs on, nobody awaits its result
            attempt.add_done_callback(_settle)
            raise
        except TimeoutError:
            attempt.add_done_callback(self._finished_late)
            error = TimeoutError(f"the registry did not answer within {self.timeout:g} s")
            self.store.failed(error)
            self.metrics.reloads.labels("failure").inc()
            raise error from None
        except Exception:
            self.metrics.reloads.labels("failure").inc()
            raise
        self._count(changed)
        return changed, message

    def _finished_late(self, attempt: asyncio.Future) -> None:
        """A load abandoned at its deadline that completed afterwards still counts."""
        if not attempt.cancelled() and attempt.exception() is None:
            self._count(attempt.result()[0])

    def _count(self, changed: bool) -> None:
        if not changed:
            return
        current = self.store.current
        self.metrics.loaded(current.ref.name, current.ref.version, current.runtime)

    async def run(self) -> None:
        """Load until it works (backoff), then watch the alias every ``interval`` seconds."""
        delay = 1.0
        while self.store.current is None:
            try:
                await self.reload_now()
            except Exception:  # counted and kept (redacted) by reload_now / the store
                wait = delay * random.uniform(0.8, 1.2)
                log.warning("no model yet (%s); next attempt in %.1f s", self.store.status.reason, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.retry_max)
        while self.interval > 0:
            await asyncio.sleep(self.interval)
            with contextlib.suppress(Exception):  # logged and counted in reload_now
                await self.reload_now()

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name="model-loader")

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
