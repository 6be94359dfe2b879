"""benchmarks/flake_loop.py runs a selection again and again under a CPU hog, reports each run,
and says "N runs, M failed" with a nonzero exit when one failed: shown on two trivial tests of its
own, for a few seconds, so nothing here depends on the project's real tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def flake_loop(tmp_path: Path, test: str, minutes: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "test_trivial.py").write_text(
        "def test_passes():\n    pass\n\ndef test_fails():\n    assert False\n"
    )
    output = tmp_path / "results.json"
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "flake_loop.py"),
        *("--minutes", minutes, "--hogs", "1", "--output", str(output)),
        *("--tests", f"{tmp_path / 'test_trivial.py'}::{test}"),
    ]
    # the trivial runs need none of the plugins installed here (their import takes seconds a run)
    quick = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=quick)
    return done, json.loads(output.read_text())


def test_it_loops_until_its_minutes_are_up_and_passes_when_every_run_passes(tmp_path):
    done, results = flake_loop(tmp_path, "test_passes", "0.02")  # 1.2 s of runs
    runs = results["summary"]["runs"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert runs >= 1 and results["summary"]["failed"] == 0
    assert results["summary"]["seconds"] >= 0.02 * 60  # it went on starting runs until then
    assert [run["run"] for run in results["runs"]] == list(range(1, runs + 1))
    assert all(run["passed"] and "1 passed" in run["summary"] for run in results["runs"])
    assert f"{runs} runs, 0 failed" in done.stdout and "run 1: pass" in done.stdout


def test_one_failed_run_fails_the_loop_and_names_the_test(tmp_path):
    done, results = flake_loop(tmp_path, "test_fails", "0")  # one run
    assert done.returncode == 1 and "1 runs, 1 failed" in done.stdout, done.stdout + done.stderr
    (run,) = results["runs"]
    failed = [Path(test).name for test in run["failed"]]
    assert not run["passed"] and failed == ["test_trivial.py::test_fails"]
    assert "assert False" in run["output_tail"] and "failed: " in done.stdout
