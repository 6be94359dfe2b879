"""The `forecast` console script. Importing the command line takes a second (typer, then the
modules each command needs), and a Ctrl-C in that second would print the import's traceback; a
command's own Ctrl-C is said by pipelines/commands/common.py. Here both end as one line,
"interrupted", and exit status 130, as a Ctrl-C anywhere else does. Once the command has ended,
the interpreter still waits for background writers (MLflow's logging threads); a Ctrl-C there
printed threading's traceback, and now says what it is waiting for, a second one leaving at once."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

from pipelines.interrupts import INTERRUPTED_EXIT  # signal, sys and threading alone: no second to cut


def main() -> None:
    try:
        from pipelines.cli import app

        app()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT) from None
    finally:
        signal.signal(signal.SIGINT, interrupted_at_teardown)


def interrupted_at_teardown(signum: int, frame: FrameType | None) -> None:
    """SIGINT after the command ended: the first says why the process has not exited yet (the
    work is done and written; background writers are finishing), the second leaves at once."""
    if getattr(interrupted_at_teardown, "asked", False):
        os._exit(INTERRUPTED_EXIT)
    interrupted_at_teardown.asked = True  # type: ignore[attr-defined]
    print(
        "the command has finished; waiting for background writers (Ctrl-C again to leave now)",
        file=sys.stderr,
    )
