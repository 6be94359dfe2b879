"""A daemon thread behind a bounded queue: the forecast log's writer and the shadow challenger.

Why one class: both take work the request path hands them without waiting (``offer`` never
blocks, a full queue refuses), both must drain what they hold at shutdown within a deadline, and
tests wait for them to finish what was handed so far (``flush``). ``None`` on the queue is the
stop sign; subclasses implement ``handle`` (one item), or ``run`` (calling ``task_done`` for every
item they take)."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Generic, TypeVar

Item = TypeVar("Item")


class QueueWorker(Generic[Item]):
    name = "worker"

    def __init__(self, max_queued: int) -> None:
        self.queue: queue.Queue[Item | None] = queue.Queue(maxsize=max_queued)
        self.thread: threading.Thread | None = None
        self.closed = False  # stop() was called: nothing offered after it would ever be handled
        self._signalled = False  # the stop sign is on the queue (once, however often stop() is called)

    def offer(self, item: Item) -> bool:
        """Queue ``item`` without blocking; False when the queue is full or the worker stopping
        (the caller counts it)."""
        if self.closed:
            return False
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Finish what is queued (within ``timeout``), then stop; True when the thread ended."""
        if self.thread is None or not self.thread.is_alive():
            return True
        deadline = time.monotonic() + timeout
        self.closed = True
        if not self._signalled:  # a queue still full at the deadline: the next stop() tries again
            with contextlib.suppress(queue.Full):
                self.queue.put(None, timeout=timeout / 2)
                self._signalled = True
        self.thread.join(max(0.0, deadline - time.monotonic()))
        return not self.thread.is_alive()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every item offered so far has been handled (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks > 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def run(self) -> None:
        """The thread: ``handle`` each item in turn until the stop sign (the forecast log
        overrides this to write whole batches)."""
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                self.handle(item)
            finally:
                self.queue.task_done()

    def handle(self, item: Item) -> None:
        raise NotImplementedError
