"""The thread-behind-a-queue that the forecast log's writer and the shadow challenger share."""

from __future__ import annotations

import threading
import time

from monitoring.queue_worker import QueueWorker


class Collector(QueueWorker[int]):
    """Handles items by keeping them; ``gate`` holds the thread until the test opens it."""

    def __init__(self, max_queued: int) -> None:
        super().__init__(max_queued)
        self.handled: list[int] = []
        self.gate = threading.Event()

    def handle(self, item: int) -> None:
        self.gate.wait(10)
        self.handled.append(item)


def test_stop_finishes_what_was_queued_and_refuses_what_comes_after():
    worker = Collector(max_queued=10)
    worker.start()
    assert all(worker.offer(i) for i in range(3))
    worker.gate.set()
    assert worker.stop(timeout=5)
    assert worker.handled == [0, 1, 2]
    assert not worker.offer(3)  # nobody would ever handle it: the caller counts it as dropped
    assert worker.stop(timeout=1) and worker.flush(timeout=1)  # a second stop is harmless


def test_a_full_queue_refuses_without_blocking_and_a_later_stop_still_stops():
    worker = Collector(max_queued=2)
    worker.start()
    assert worker.offer(0)  # taken by the thread, which waits at the gate
    while worker.queue.qsize():
        time.sleep(0.01)
    assert worker.offer(1) and worker.offer(2)
    assert not worker.offer(3)  # full: refused at once
    assert not worker.stop(timeout=0.2)  # no room for the stop sign, the thread still held
    worker.gate.set()
    assert worker.stop(timeout=5)  # the sign is put on the retry
    assert worker.handled == [0, 1, 2]
