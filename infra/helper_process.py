"""One helper process beside a server process, for work that would hold the interpreter lock
(parsing a large body, scoring the monitor): the service's body parser and its monitoring routes
each keep one.

Why spawn, not fork: the server process has threads (torch, the batcher, the log's writer) and a
forked child would inherit their locks mid-use. Why the helper ignores Ctrl-C: it reaches the
whole process group, and the server stops its helper itself; a helper dying of it would print a
KeyboardInterrupt traceback of its own. A helper that hangs or dies is replaced (``replace``)."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

STOP_WAIT_S = 5.0  # how long ``stop`` waits for the helper before it kills it


def ignore_interrupts() -> None:
    """In the helper: Ctrl-C is the server's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class HelperProcess:
    """A pool of one spawned process, started with ``warm`` submitted (so that it has imported
    what it needs before the first call), replaced when it hangs or dies."""

    def __init__(self, warm: Callable[[], Any]) -> None:
        self.warm = warm
        self.pool: ProcessPoolExecutor | None = None
        self.warmed: Future | None = None  # the helper's start: done once it has imported

    def start(self) -> None:
        self.pool = ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_interrupts
        )
        self.warmed = self.pool.submit(self.warm)

    def replace(self, pool: ProcessPoolExecutor) -> None:
        """End ``pool``'s process and start a fresh one, unless another caller replaced it already."""
        if pool is not self.pool:
            return
        for worker in list(getattr(pool, "_processes", {}).values()):
            worker.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        self.start()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in the helper, waiting here (a thread's call); in this process
        when the helper died (it is replaced for the next call)."""
        pool = self.pool
        if pool is None:
            return function(*args)
        try:
            return pool.submit(function, *args).result()
        except BrokenProcessPool:
            self.replace(pool)
            return function(*args)

    async def stop(self) -> None:
        """Stop the helper and wait (up to STOP_WAIT_S) until it is gone: uvicorn re-raises
        SIGTERM after its shutdown, so nothing after this would reap a helper left running."""
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        workers = list(getattr(pool, "_processes", {}).values())  # to end them if they hang
        try:
            await asyncio.wait_for(
                asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True), STOP_WAIT_S
            )
        except TimeoutError:
            for worker in workers:
                worker.kill()
