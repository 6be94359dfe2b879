"""The `forecast` console script. Importing the command line takes a second (typer, then the
modules each command needs), and a Ctrl-C in that second would print the import's traceback; a
command's own Ctrl-C is said by pipelines/commands/common.py. Here both end as one line,
"interrupted", and exit status 130, as a Ctrl-C anywhere else does."""

from __future__ import annotations

import sys

from pipelines.interrupts import INTERRUPTED_EXIT  # signal, sys and threading alone: no second to cut


def main() -> None:
    try:
        from pipelines.cli import app

        app()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT) from None
