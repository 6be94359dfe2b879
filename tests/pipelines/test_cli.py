"""The `forecast` console script as a user runs it: a clean terminal, flags that mean what they
say, and `forecast ui` that stops when asked."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import TINY, free_port, venv_bin
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


@pytest.mark.slow  # starts every CLI command as a process: in make test, not make test-fast
def test_help_writes_nothing_to_stderr(tmp_path):
    for command in COMMANDS:
        result = run(command, "--help", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", f"{command} --help: {result.stderr}"
        assert "Usage" in result.stdout


def assert_only_our_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no library warnings, no `color_warning(`, no traceback
    assert lines[0].startswith("error: ") and fragment in lines[0], result.stderr


LIBRARY_NOISE = ("GPU available", "TPU available", "Tip:", "weights_only", "Warning", "color_warning")


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_training_prints_only_our_lines(tmp_path):
    """A whole `forecast train --register` run: progress, results and registration, nothing from
    Lightning, MLflow or torch on either stream."""
    settings = [part for item in TINY for part in ("--set", item)]
    result = run("train", *settings, "--register", "clean", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for stream in (result.stdout, result.stderr):
        noise = [line for line in stream.splitlines() if any(word in line for word in LIBRARY_NOISE)]
        assert not noise, noise
    assert "epoch 1/2" in result.stdout and "registered clean v1" in result.stdout


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
        [FORECAST, "ui", "--port", str(port), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
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
