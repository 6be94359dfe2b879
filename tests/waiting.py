"""Waiting on state, not on the clock. A test that needs something to have happened (a request
queued, a load failed, a lock asked for) polls for that state, or waits on an event its test
double sets, with a deadline generous enough that it only fails when the state never comes. A
fixed sleep is either wasted time or, on a loaded machine, too short: the tests that used them
failed now and then under a full run's load (issue 31)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 60.0  # how long a state may take to arrive, on a machine as loaded as CI's can be
INTERVAL_S = 0.02


def until(
    condition: Callable[[], T], what: str, timeout: float = DEADLINE_S, interval: float = INTERVAL_S
) -> T:
    """``condition()``'s first truthy value, polled every ``interval`` s; fails naming ``what``
    if ``timeout`` s pass without one."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(interval)
    return value


async def until_async(
    condition: Callable[[], T], what: str, timeout: float = DEADLINE_S, interval: float = INTERVAL_S
) -> T:
    """``until`` inside an event loop: the loop runs (other tasks make progress) between polls."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        await asyncio.sleep(interval)
    return value
