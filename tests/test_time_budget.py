"""The suite's time budget (tests/conftest.py, issue 40): over FORECAST_TEST_BUDGET_S a whole run
fails and names its slowest tests; within it, or unset, nothing changes; a malformed value stops
the run before any test. Checked on a real pytest run of one quick test of this suite."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import BUDGET_VARIABLE, REPO

QUICK = "tests/test_layers.py::test_no_package_imports_a_layer_it_must_not[forecaster]"
# The run under test needs only tests/conftest.py (and pytest-xdist for the two-worker case): the
# installed plugins this suite's other tests use are left out, as importing them (hypothesis,
# schemathesis) took most of each run's seconds
UNUSED_PLUGINS = [
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:schemathesis",
    "-p",
    "no:anyio",
    "-p",
    "no:pytest_cov",
]


def pytest_run(budget: str | None, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != BUDGET_VARIABLE}
    if budget is not None:
        env[BUDGET_VARIABLE] = budget
    command = [sys.executable, "-m", "pytest", QUICK, "-q", "-p", "no:cacheprovider", *UNUSED_PLUGINS, *extra]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "two-workers"])
def test_a_run_over_its_budget_fails_naming_its_slowest_tests(workers):
    over = pytest_run("0.001", *workers)
    assert over.returncode == pytest.ExitCode.TESTS_FAILED, over.stdout
    assert "over its budget of 0 s (FORECAST_TEST_BUDGET_S)" in over.stdout, over.stdout
    assert QUICK in over.stdout.split("over its budget", 1)[1]
    assert "1 passed" in over.stdout  # the tests themselves passed


def test_a_run_within_its_budget_or_without_one_passes():
    for budget in ("3600", None):
        result = pytest_run(budget)
        assert result.returncode == 0 and "over its budget" not in result.stdout, result.stdout


def test_a_malformed_budget_is_refused_naming_the_variable():
    result = pytest_run("ten minutes")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "FORECAST_TEST_BUDGET_S='ten minutes': give a number of seconds" in result.stderr + result.stdout
