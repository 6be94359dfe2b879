"""What a command writes when its output is piped (CI, `| jq`, a log file): no library noise on
either stream (progress frames, warnings, MLflow's INFO lines on a fresh store), and with --json
the JSON document alone on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipelines.cli import quiet_environment
from tests.conftest import REPO, venv_bin
from tests.pipelines.helpers import tiny_settings

# \r: a redrawn progress line; \x1b[: terminal control; the rest: tqdm's and rich's bar glyphs,
# Lightning's device and tip lines, torch's weights_only notice, click's color_warning(
NOISE = ("\r", "\x1b[", "█", "╸", "it/s", "Warning", "WARNING", "INFO", "Creating initial")
NOISE += ("GPU available", "TPU available", "Tip:", "weights_only", "color_warning")
FORECAST = str(venv_bin() / "forecast")  # the console script, as a user runs it


def forecast_piped(cwd, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "MLFLOW_LOGGING_LEVEL")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [FORECAST, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_quiet(result: subprocess.CompletedProcess, command: str) -> None:
    assert result.returncode == 0, f"{command}: {result.stderr[-3000:]}"
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        found = [word for word in NOISE if word in stream]
        assert not found, f"{command} {name} holds {found}:\n{stream[-3000:]}"


def json_document(result: subprocess.CompletedProcess, command: str) -> dict:
    """stdout is one JSON document, nothing before or after (what `| python -m json.tool` reads)."""
    checked = subprocess.run(
        [sys.executable, "-m", "json.tool"], input=result.stdout, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, f"{command} --json stdout is not JSON: {result.stdout[-2000:]}"
    return json.loads(result.stdout)


@pytest.mark.slow  # trains real models in processes: in make test, not make test-fast
def test_piped_commands_print_no_library_noise_and_json_alone_on_stdout(tmp_path):
    """On a fresh SQLite store (MLflow creates its tables on first use): train (to the default
    store, registering: progress, results and registration), evaluate, backtest and compare,
    plain and with --json (`--quiet` is the plain output less the epoch lines:
    tests/pipelines/test_progress.py). The console script, as a user runs it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tiny = tiny_settings("train.progress_bar=true")  # the default: only a terminal may show a bar
    (tmp_path / "tiny.yaml").write_text("data: {dataset: melbourne-temp}\n")

    trained = forecast_piped(tmp_path, "train", *tiny, "--register", "clean")  # to ./mlflow.db: uri
    assert_quiet(trained, "train")
    assert "epoch 2/2" in trained.stdout and "test split" in trained.stdout  # the human output stays
    assert "epoch 1/2" in trained.stdout and "registered clean v1" in trained.stdout
    as_json = forecast_piped(tmp_path, "train", *tiny, "--tracking-uri", uri, "--json")
    assert_quiet(as_json, "train --json")
    run = json_document(as_json, "train")
    assert set(run) >= {"run_id", "model_uri", "metrics"} and "epoch 2/2" in as_json.stderr

    model = ["--model-uri", run["model_uri"], "--tracking-uri", uri]
    evaluated = forecast_piped(tmp_path, "evaluate", *model)
    assert_quiet(evaluated, "evaluate")
    evaluated = forecast_piped(tmp_path, "evaluate", *model, "--json")
    assert_quiet(evaluated, "evaluate --json")
    assert set(json_document(evaluated, "evaluate")["metrics"]) == {"model", "naive", "seasonal_naive"}

    backtest = ["--config", "tiny.yaml", *tiny, "--folds", "2", "--tracking-uri", uri]
    tested = forecast_piped(tmp_path, "backtest", *backtest)
    assert_quiet(tested, "backtest")
    assert "fold 2/2" in tested.stdout
    tested = forecast_piped(tmp_path, "backtest", *backtest, "--json")
    assert_quiet(tested, "backtest --json")
    document = json_document(tested, "backtest")
    assert len(document["folds"]) == 2 and set(document["summary"]["model"]) == {"mean", "std"}
    assert "fold 2/2" in tested.stderr

    compared = forecast_piped(tmp_path, "compare", "--tracking-uri", uri, "--json")
    assert_quiet(compared, "compare --json")
    rows = json_document(compared, "compare")["runs"]
    assert len(rows) == 2 and run["run_id"] in {row["run_id"] for row in rows}
    assert all(row["lookback"] == 14 and row["horizon"] == 4 for row in rows)
    maes = [row["selection_mae"] for row in rows]
    assert maes == sorted(maes)


# Imports MLflow's server noting every warning issued on the way, silenced or not, and prints
# their categories: one process (5 s of CPU) shows both that the import warns and that the
# environment silences it.
SERVER_IMPORT = """
import warnings

issued = []
warn = warnings.warn


def noting(message, category=None, stacklevel=1, source=None):
    issued.append((category or getattr(message, "__class__", UserWarning)).__name__)
    warn(message, category, stacklevel + 1, source)


warnings.warn = noting
import mlflow.server.fastapi_app

print(",".join(sorted(set(issued))))
"""


@pytest.mark.slow  # starts a Python process importing MLflow's server: in make test, not make test-fast
def test_forecast_ui_starts_mlflow_without_warnings():
    """`forecast ui` execs `mlflow ui` with this environment; importing the server it runs warns
    (StarletteDeprecationWarning, shown by Python's default filters) without it."""
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    quiet = subprocess.run(
        [sys.executable, "-c", SERVER_IMPORT],
        env=quiet_environment(plain),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    issued = quiet.stdout.strip().split(",")
    assert "StarletteDeprecationWarning" in issued, issued  # else this test checks nothing


def test_the_users_own_warning_filters_win_over_the_quiet_ones():
    env = quiet_environment({"PYTHONWARNINGS": "error::DeprecationWarning", "MLFLOW_LOGGING_LEVEL": "DEBUG"})
    assert env["PYTHONWARNINGS"].endswith(",error::DeprecationWarning")  # later entries take precedence
    assert env["MLFLOW_LOGGING_LEVEL"] == "DEBUG"
