"""How `make test` hands tests to its workers: a module runs whole on one worker, so its module
fixtures (the models a service module trains, a server stack) are set up once per run.

Why a test: pytest-xdist's `--dist loadgroup` stopped grouping under pytest 9 without a word (its
`xdist_group` tag writes a node attribute pytest 9 no longer reads), and modules meant to train
their models once trained them two or three times, on both workers. Checked on a real run of
`make test`'s own pytest options (read from `make -n`) over two generated modules."""

from __future__ import annotations

import shlex
import subprocess
import sys

from tests.conftest import REPO
from tests.test_time_budget import UNUSED_PLUGINS

SHARED = """
import os
import pytest


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")


@pytest.mark.parametrize("n", range(8))
def test_shared(trained, n):
    pass
"""
OTHER = """
import pytest


@pytest.mark.parametrize("n", range(16))
def test_other(n):
    pass
"""


def make_test_pytest_options() -> list[str]:
    """The options `make test` gives pytest (after `-m pytest`), as make would run them."""
    dry = subprocess.run(
        ["make", "-s", "-n", "test", "PYTEST_ARGS="], cwd=REPO, capture_output=True, text=True, check=True
    )
    line = next(line for line in dry.stdout.splitlines() if " -m pytest " in line)
    return shlex.split(line.split(" -m pytest ", 1)[1])


def test_make_test_sets_up_a_module_fixture_once(tmp_path):
    options = make_test_pytest_options()
    assert "-n" in options and options[options.index("-n") + 1] == "2", options  # two workers
    (tmp_path / "test_shared.py").write_text(SHARED)
    (tmp_path / "test_other.py").write_text(OTHER)
    setups = tmp_path / "setups.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "-q", "-p", "no:cacheprovider", *UNUSED_PLUGINS, "."],
        cwd=tmp_path,
        env={"SETUPS": str(setups), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "24 passed" in result.stdout, result.stdout + result.stderr
    assert len(setups.read_text().split()) == 1, f"the module fixture was set up on: {setups.read_text()}"
