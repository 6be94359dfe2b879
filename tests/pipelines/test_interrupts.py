"""Ctrl-C says what happened: a training stopped mid-run names its run and the command that
continues it (exit 130), which then says where it resumes and finishes the run; stopped before
its run exists, "interrupted" (130)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time

import mlflow
import pytest

from pipelines.interrupts import (
    INTERRUPTED_EXIT,
    RunInterrupted,
    naming_run,
    resume_line,
    sigint_received,
    watching_sigint,
)
from tests.conftest import REPO, TINY, empty_tracking_store
from tests.pipelines.helpers import forecast

# eight epochs of a second or two each: time to see epoch 2 end and press Ctrl-C before the end
EIGHT_EPOCHS = [
    *(s for s in TINY if not s.startswith(("train.epochs", "train.limit_train_batches", "train.batch_size"))),
    "train.epochs=8",
    "train.patience=10",
    "train.batch_size=32",
    "model.hidden_size=16",
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def forecast_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", *args]  # what the `forecast` script runs


def default_sigint() -> None:
    """A child of a shell's background job inherits SIGINT ignored: a terminal's Ctrl-C is not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_available(fd: int, wait_s: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], wait_s)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the child side closed
        return b""


def ctrl_c_after(tmp_path, marker: str, *args: str) -> tuple[int, str]:
    """Run `forecast ARGS` on a pseudo-terminal (live bar and all, as a user sees it), send SIGINT
    to its process group once ``marker`` is on screen; its exit code and everything it showed."""
    main, child = os.openpty()
    process = subprocess.Popen(
        forecast_command(*args),
        cwd=tmp_path,
        env=environment(),
        stdin=child,
        stdout=child,
        stderr=child,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    os.close(child)
    shown = b""
    try:
        deadline = time.monotonic() + 300
        while marker not in ANSI.sub("", shown.decode(errors="replace")):
            assert process.poll() is None, (
                f"ended before {marker!r}: {shown.decode(errors='replace')[-2000:]}"
            )
            assert time.monotonic() < deadline, (
                f"no {marker!r} in time: {shown.decode(errors='replace')[-2000:]}"
            )
            shown += read_available(main, 1.0)
        os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            shown += read_available(main, 0.5)
        shown += read_available(main, 0.5)
        return process.wait(timeout=60), ANSI.sub("", shown.decode(errors="replace")).replace("\r", "")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        os.close(main)


@pytest.mark.slow  # trains a real model on a pseudo-terminal: in make test, not make test-fast
def test_ctrl_c_names_the_run_and_the_command_that_resumes_it(tmp_path, monkeypatch):
    """The Ctrl-C in a process of its own, on a terminal; the printed command then runs in this
    one (what it says and does is the point, not its process: that would cost seconds of
    imports)."""
    uri = empty_tracking_store(tmp_path / "mlflow.db")
    settings = [arg for item in EIGHT_EPOCHS for arg in ("--set", item)]
    # epoch 2's line: its end (the checkpoint of epoch 1 is logged; epoch 2's as epoch 3 starts)
    code, shown = ctrl_c_after(tmp_path, "epoch 2/8  train_loss", "train", *settings, "--tracking-uri", uri)

    assert code == INTERRUPTED_EXIT, shown[-3000:]
    said = [line for line in shown.splitlines() if line.startswith("interrupted")]
    assert len(said) == 1, shown[-3000:]
    command = re.search(r"continue it with: (forecast train --resume (\w+) .*)$", said[0])
    assert command is not None, said[0]
    run_id = command[2]
    assert command[1] == f"forecast train --resume {run_id} --tracking-uri {uri}"
    client = mlflow.MlflowClient(uri)
    stopped = client.get_run(run_id)
    assert stopped.info.status == "FAILED" and f"({stopped.info.run_name})" in said[0]
    done = int(stopped.data.tags["checkpoint.epochs"])
    assert 1 <= done < 8

    monkeypatch.chdir(tmp_path)
    resumed = forecast(*shlex.split(command[1])[1:])  # the printed command, as `forecast` runs it
    assert resumed.exit_code == 0, resumed.output[-3000:]
    assert f"resuming run {run_id} ({stopped.info.run_name}) from epoch {done} of 8" in resumed.stderr
    assert f"run {run_id}  model" in resumed.stdout
    finished = client.get_run(run_id)
    assert finished.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run_id, "val_loss"))
    assert steps == list(range(8))
    print(f"Ctrl-C after epoch {done} of 8: {said[0]}")


@pytest.mark.slow  # starts the CLI as a process: in make test, not make test-fast
def test_ctrl_c_before_the_run_exists_says_interrupted(tmp_path):
    """Blocked reading its data file (a FIFO nobody writes yet): no run exists, nothing to resume."""
    fifo = tmp_path / "series.csv"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        forecast_command("train", "--data", "series.csv", "--time-column", "t", "--target", "y"),
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    try:
        writer = os.open(fifo, os.O_WRONLY)  # returns once the command opened the file to read it
        try:
            os.killpg(process.pid, signal.SIGINT)
            out, err = process.communicate(timeout=120)
        finally:
            os.close(writer)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == INTERRUPTED_EXIT, err
    assert err.strip() == "interrupted" and out == ""
    assert not (tmp_path / "mlflow.db").exists()  # stopped before any run


@pytest.fixture
def sigint_as_in_a_terminal():
    """Python's own SIGINT handler while the test runs: pytest started as a background job of a
    non-interactive shell inherits SIGINT ignored, which watching_sigint rightly leaves alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_lightnings_exit_after_a_ctrl_c_leaves_as_the_runs_interruption(sigint_as_in_a_terminal):
    """Lightning catches the KeyboardInterrupt in fit and calls sys.exit(1)."""
    with watching_sigint():
        with pytest.raises(RunInterrupted) as caught, naming_run("abc123", "lstm-x"):
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                sys.exit(1)
        assert sigint_received()
    assert (caught.value.run_id, caught.value.run_name) == ("abc123", "lstm-x")
    line = resume_line(caught.value, "sqlite:///my store.db")
    assert line.endswith(
        "continue it with: forecast train --resume abc123 --tracking-uri 'sqlite:///my store.db'"
    )
    assert "--tracking-uri" not in resume_line(caught.value, None)


def test_an_exit_without_a_ctrl_c_passes_unchanged():
    previous = signal.getsignal(signal.SIGINT)
    with watching_sigint():
        with pytest.raises(SystemExit), naming_run("abc123", "lstm-x"):
            sys.exit(1)
        assert not sigint_received()
    assert signal.getsignal(signal.SIGINT) is previous  # the handler is put back


def test_after_a_ctrl_c_a_half_built_objects_destructor_prints_nothing(monkeypatch, capsys):
    """A KeyboardInterrupt inside a constructor leaves an object whose __del__ fails (GitPython's
    config parser, while MLflow starts a run): its "Exception ignored in" report is dropped once
    the CLI leaves on a Ctrl-C, and a host's own hook (pytest's) is left alone."""
    import sys

    from pipelines.interrupts import drop_unraisable, silence_destructors

    pytests_hook = sys.unraisablehook
    silence_destructors()
    assert sys.unraisablehook is pytests_hook
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    silence_destructors()
    assert sys.unraisablehook is drop_unraisable

    class HalfBuilt:
        def __del__(self):
            raise AttributeError("'HalfBuilt' object has no attribute '_read_only'")

    HalfBuilt()  # collected at once: its __del__ fails into the hook
    assert "Exception ignored" not in capsys.readouterr().err
