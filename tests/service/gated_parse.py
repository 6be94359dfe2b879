"""Body parsers that hold until a test lets them go, for the parser's helper process: a parse that
lasts exactly as long as the test needs, with nothing timed. Its own small module, so the helper
process (spawned) imports only this and the parsers to unpickle it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from forecaster.data.clock import LEGACY
from service import parsing
from service.actuals import parse_in_worker

HOLD_AT_MOST_S = 60.0  # a test that never opens the gate must not leave the helper stuck


def hold(gate: str) -> None:
    """Until the file ``gate`` exists (at most HOLD_AT_MOST_S); ``gate``.started says it began."""
    Path(f"{gate}.started").touch()
    deadline = time.monotonic() + HOLD_AT_MOST_S
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # polling the gate's state, bounded


def gated_parse(gate: str, body: bytes, clock: str = LEGACY) -> Any:
    """The actuals body's parse (``parse_in_worker(body, clock)``) once ``gate`` exists."""
    hold(gate)
    return parse_in_worker(body, clock)


def held_predict_parse(gate: str, body: bytes) -> Any:
    """The predict body's parse, held until ``gate`` exists: a parse slower than any timeout a test
    sets, however loaded the machine (a fast parse can beat a tiny timeout when the event loop
    runs late)."""
    hold(gate)
    return parsing.parse_in_worker(body)
