"""The tests that used to be timing-bound (issue 31), run again and again under a CPU hog: they
now wait on state (events, bounded polling) instead of fixed sleeps and wall-clock bounds, so a
loaded machine must make them slower, never red. Not run by CI: a check to run by hand.

Each run is pytest in a subprocess over the selected tests, for as long as ``--minutes`` allows
(at least one run), while ``--hogs`` busy-loop processes (one per CPU by default) compete for
every core. Prints each run's outcome, then "N runs, M failed"; exits 1 if any failed. Raw
results go to benchmarks/results/flake_loop.json (``--output`` elsewhere).

    .venv/bin/python benchmarks/flake_loop.py                    # 30 minutes, the default tests
    .venv/bin/python benchmarks/flake_loop.py --minutes 5 --tests tests/service/test_http.py::test_full_queue_answers_503_with_retry_after
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from provenance import commit  # noqa: E402

RAW_RESULTS = REPO / "benchmarks" / "results" / "flake_loop.json"

# The tests that slept a fixed time for something to happen, or bounded a duration (issue 31).
TIMING_BOUND = [
    "tests/service/test_resilience.py::test_the_queue_bound_counts_windows_and_shutdown_answers_every_waiting_caller",
    "tests/service/test_resilience.py::test_a_load_abandoned_at_shutdown_reports_nothing_with_the_password",
    "tests/service/test_resilience.py::test_a_dead_batcher_turns_readiness_503_and_is_restarted",
    "tests/service/test_resilience.py::test_callers_that_hang_up_are_dropped_before_the_forward_pass",
    "tests/service/test_resilience.py::test_a_dead_registry_at_start_opens_the_port_at_once_and_leaks_no_secret",
    "tests/service/test_resilience.py::test_the_service_outlives_a_killed_tracking_server_and_follows_it_when_back",
    "tests/service/test_resilience.py::test_callers_still_waiting_when_the_server_gives_up_on_shutdown_get_503",
    "tests/service/test_http.py::test_full_queue_answers_503_with_retry_after",
    "tests/pipelines/test_selection.py::test_two_promotions_at_once_cannot_let_the_worse_one_win",
    "tests/service/test_monitoring.py::test_a_challenger_in_shadow_is_scored_on_the_same_requests",
    "tests/service/test_monitoring.py::test_readiness_says_whether_the_monitor_gauges_are_current",
]
RUN_TIMEOUT_S = 1800  # one run of pytest that takes longer than this counts as failed
TAIL = 4000  # characters of a failed run's output kept in the results


@contextmanager
def cpu_hog(processes: int) -> Iterator[list[int]]:
    """``processes`` busy loops for as long as the block runs; yields their process ids."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.wait()


def pytest_command(tests: list[str]) -> list[str]:
    """-rf lists the failed test ids at the end, whatever the project's addopts say."""
    return [sys.executable, "-m", "pytest", *tests, "-q", "-rf", "-p", "no:cacheprovider"]


def run_once(number: int, tests: list[str]) -> dict:
    """One pytest run in a subprocess: its outcome, duration, summary line and failed ids."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            pytest_command(tests), cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        returncode, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = None
        output = f"{exc.stdout or ''}{exc.stderr or ''}\nthe run took longer than {RUN_TIMEOUT_S} s"
    lines = output.strip().splitlines()
    result = {
        "run": number,
        "passed": returncode == 0,
        "returncode": returncode,
        "seconds": round(time.monotonic() - started, 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "summary": lines[-1].strip("= ") if lines else "",
        "failed": [line.split()[1] for line in lines if line.startswith(("FAILED ", "ERROR "))],
    }
    if not result["passed"]:
        result["output_tail"] = output[-TAIL:]
    return result


def report(result: dict) -> str:
    outcome = "pass" if result["passed"] else "FAIL"
    line = f"run {result['run']}: {outcome} in {result['seconds']:.0f} s (load {result['load_1m']}): {result['summary']}"
    return "\n".join([line, *(f"    failed: {test}" for test in result["failed"])])


def loop(tests: list[str], minutes: float, hogs: int) -> dict:
    """Runs until ``minutes`` have passed (at least once), under the hog all along."""
    results: dict = {
        "config": {"minutes": minutes, "hogs": hogs, "tests": tests},
        "commit": commit(),
        "cpus": os.cpu_count(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": [],
    }
    started = time.monotonic()
    deadline = started + minutes * 60
    with cpu_hog(hogs):
        while not results["runs"] or time.monotonic() < deadline:
            result = run_once(len(results["runs"]) + 1, tests)
            results["runs"].append(result)
            print(report(result), flush=True)
    failed = sum(not run["passed"] for run in results["runs"])
    seconds = round(time.monotonic() - started, 1)
    results["summary"] = {"runs": len(results["runs"]), "failed": failed, "seconds": seconds}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="keep starting runs this long")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=TIMING_BOUND,
        help="pytest ids or paths (default: the timing-bound tests)",
    )
    parser.add_argument(
        "--hogs", type=int, default=os.cpu_count() or 1, help="busy-loop processes (one per CPU)"
    )
    parser.add_argument(
        "--output", type=Path, default=RAW_RESULTS, help=f"raw results (default {RAW_RESULTS})"
    )
    args = parser.parse_args()
    print(f"{len(args.tests)} test selection(s), {args.minutes:g} min, {args.hogs} busy loop(s)", flush=True)
    results = loop(args.tests, args.minutes, args.hogs)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n")
    summary = results["summary"]
    print(f"{summary['runs']} runs, {summary['failed']} failed (raw results: {args.output})")
    sys.exit(1 if summary["failed"] else 0)


if __name__ == "__main__":
    main()
