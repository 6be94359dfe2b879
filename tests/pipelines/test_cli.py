"""The `forecast` console script as a user runs it: a clean terminal, flags that mean what they
say, and `forecast ui` that stops when asked."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import empty_tracking_store, free_port, venv_bin
from tests.pipelines.helpers import forecast

COMMANDS = [
    "train",
    "evaluate",
    "backtest",
    "sweep",
    "predict",
    "compare",
    "register",
    "promote",
    "datasets",
    "ui",
    "serve",
]
FORECAST = str(venv_bin() / "forecast")


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run(
        [FORECAST, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False
    )


HELP_OF_EACH = """
import sys
from pipelines.cli import app
for command in sys.argv[1:]:
    for stream in (sys.stdout, sys.stderr):  # where each command's text starts, on both streams
        stream.write(f"<<{command}>>\\n")
        stream.flush()
    try:
        app([command, "--help"], prog_name="forecast")
    except SystemExit as exit:
        assert exit.code in (0, None), f"{command} --help exited {exit.code}"
"""


def by_command(stream: str) -> dict[str, str]:
    """What each command wrote, from the <<command>> lines HELP_OF_EACH puts before it."""
    parts = re.split(r"^<<([\w-]+)>>\n", stream, flags=re.MULTILINE)
    assert parts[0] == "", parts[0]  # nothing before the first command (imports included)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.slow  # starts CLI processes: in make test, not make test-fast
def test_help_writes_nothing_to_stderr(tmp_path):
    """`forecast train --help` as a user runs it; then every command's in one process: the same
    imports (pipelines/cli.py imports every command's module), without a second of CPU each."""
    result = run("train", "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "Usage" in result.stdout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    each = subprocess.run(
        [sys.executable, "-c", HELP_OF_EACH, *COMMANDS],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert each.returncode == 0, each.stderr
    shown, errors = by_command(each.stdout), by_command(each.stderr)
    assert list(shown) == list(errors) == COMMANDS
    for command in COMMANDS:
        assert errors[command] == "", f"{command} --help: {errors[command]}"
        assert "Usage: forecast " + command in shown[command], shown[command]


def assert_only_our_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no library warnings, no `color_warning(`, no traceback
    assert lines[0].startswith("error: ") and fragment in lines[0], result.stderr


# A whole `forecast train --register` run printing only our lines (progress, results and
# registration; nothing from Lightning, MLflow or torch on either stream) is checked with the other
# piped commands: tests/pipelines/test_quiet_output.py.


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_failing_command_prints_only_our_one_line_error(tmp_path):
    # gets as far as loading the data: torch, Lightning, MLflow and the pyfunc are all imported
    (tmp_path / "series.csv").write_text("t,y\n2020-01-01,1\n2020-01-02,2\n")
    result = run("train", "--data", "series.csv", "--time-column", "t", "--target", "nope", cwd=tmp_path)
    assert_only_our_error(result, "['nope'] not found")


def test_a_missing_file_is_reported_as_missing_whatever_else_is_missing(tmp_path):
    for extra in ([], ["--time-column", "t", "--target", "y"]):
        started = time.perf_counter()
        result = run("train", "--data", "missing.csv", *extra, cwd=tmp_path)
        assert_only_our_error(result, "missing.csv: file not found")
        assert time.perf_counter() - started < 30  # answered before torch is imported


@pytest.mark.parametrize("flag", ["--horizon", "--lookback"])
def test_zero_window_sizes_are_rejected_not_ignored(flag, tracking_uri):
    quick = [
        "--set",
        "train.epochs=1",
        "--set",
        "train.limit_train_batches=1",
        "--set",
        "model.hidden_size=4",
    ]
    result = forecast("train", "--data", "melbourne-temp", flag, "0", *quick, "--tracking-uri", tracking_uri)
    assert result.exit_code == 2, result.output
    assert f"window.{flag[2:]}: Input should be greater than or equal to 1" in result.stderr


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.integration
def test_sigterm_stops_forecast_ui_and_everything_it_started(tmp_path):
    port = free_port()
    ui = subprocess.Popen(
        [FORECAST, "ui", "--port", str(port), "--tracking-uri", empty_tracking_store(tmp_path / "mlflow.db")],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: everything it starts is findable
    )
    try:
        deadline = time.monotonic() + 180
        while not port_answers(port):
            assert ui.poll() is None, "forecast ui exited before serving"
            assert time.monotonic() < deadline, "forecast ui never answered"
            time.sleep(0.5)
        ui.send_signal(signal.SIGTERM)
        ui.wait(timeout=15)
        deadline = time.monotonic() + 10
        while (port_answers(port) or group_alive(ui.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not port_answers(port), "still serving after SIGTERM"
        assert not group_alive(ui.pid), "processes of forecast ui survived SIGTERM"
    finally:
        if group_alive(ui.pid):
            os.killpg(ui.pid, signal.SIGKILL)
        ui.wait(timeout=10)


def test_forecast_ui_becomes_a_lean_mlflow_ui(monkeypatch):
    """It execs `mlflow ui` (signals reach it directly) with one uvicorn worker and without
    MLflow's job runner (huey consumers)."""
    calls = []
    monkeypatch.setattr(os, "execvpe", lambda file, args, env: calls.append((file, args, env)))
    result = forecast("ui", "--port", "5999", "--tracking-uri", "sqlite:///x.db")
    assert result.exit_code == 0, result.output
    ((file, args, env),) = calls
    assert file == sys.executable and args[1:4] == ["-m", "mlflow", "ui"]
    assert args[args.index("--workers") + 1] == "1"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
