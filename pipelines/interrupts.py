"""Ctrl-C, said plainly. Lightning catches KeyboardInterrupt inside ``fit``, runs its
``on_exception`` hooks and calls ``sys.exit(1)`` (pytorch_lightning/trainer/call.py): left alone,
a Ctrl-C mid-training ends silently with exit 1, its run FAILED with a checkpoint that
``--resume`` would continue, and the user never told so. Here a SIGINT is recorded, so that exit
can be told from any other, and a training interrupted once its run exists leaves as
``RunInterrupted`` naming the run; the CLI turns both into one line and exit 130."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

INTERRUPTED_EXIT = 130  # 128 + SIGINT: what a shell reports for a program stopped by Ctrl-C

_received = threading.Event()


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C after ``run_id`` was started: the run ended FAILED, its last checkpoint logged."""

    def __init__(self, run_id: str, run_name: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.run_name = run_name


def _record(signum: int, frame: FrameType | None) -> None:
    _received.set()
    signal.default_int_handler(signum, frame)  # KeyboardInterrupt, as Python's own handler


@contextmanager
def watching_sigint() -> Iterator[None]:
    """Record SIGINT while inside (and raise KeyboardInterrupt as usual); the previous handler
    comes back after, so Lightning's SIG_IGN after a Ctrl-C does not outlive a command run
    in-process. A SIGINT inherited as ignored (a background job of a non-interactive shell) stays
    ignored; off the main thread signals cannot be handled, so nothing changes there."""
    _received.clear()
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGINT, _record)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def silence_destructors() -> None:
    """For a process leaving after a Ctrl-C: a KeyboardInterrupt can land inside a constructor,
    and the half-built object's ``__del__`` then fails when it is collected (GitPython's config
    parser, met while MLflow starts a run, prints "Exception ignored in ... AttributeError" after
    the "interrupted" line). Nothing in such a report is for the user: it is dropped. Only
    Python's own hook is replaced: one a host installed (pytest's, running the CLI in-process)
    stays."""
    if sys.unraisablehook is sys.__unraisablehook__:
        sys.unraisablehook = drop_unraisable


def drop_unraisable(_unraisable: object) -> None:
    """An ``sys.unraisablehook`` that reports nothing (``silence_destructors``)."""


def sigint_received() -> bool:
    """Whether a SIGINT arrived inside ``watching_sigint``: a ``SystemExit`` then is Lightning's
    answer to it, not a failure."""
    return _received.is_set()


@contextmanager
def naming_run(run_id: str, run_name: str) -> Iterator[None]:
    """Inside, a Ctrl-C, whether raised or turned into ``sys.exit(1)`` by Lightning, leaves as
    ``RunInterrupted(run_id, run_name)``; other exits pass unchanged."""
    try:
        yield
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        raise RunInterrupted(run_id, run_name) from None
    except SystemExit:
        if not sigint_received():
            raise
        raise RunInterrupted(run_id, run_name) from None


def resume_line(interrupted: RunInterrupted, tracking_uri: str | None) -> str:
    """One line: the run, and the command that continues it (with the store given on the command
    line; one from $MLFLOW_TRACKING_URI is found again the same way)."""
    import shlex

    command = f"forecast train --resume {interrupted.run_id}"
    if tracking_uri is not None:
        command += f" --tracking-uri {shlex.quote(tracking_uri)}"
    return (
        f"interrupted: run {interrupted.run_id} ({interrupted.run_name}) stopped at its last "
        f"checkpoint; continue it with: {command}"
    )
