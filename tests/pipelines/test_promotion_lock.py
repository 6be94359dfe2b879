"""Promotions take turns on the tracking backend's own lock (pipelines/locks.py): a file
lock beside SQLite, an advisory lock in PostgreSQL, a renewed tag lease elsewhere; and four
`forecast promote` processes at once leave the best version holding the alias."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import mlflow
import pytest

import pipelines.locks as locks
from pipelines.locks import LockError, model_tag, promotion_lock, tag_lease
from tests.conftest import REPO, empty_tracking_store
from tests.pipelines.helpers import train_json
from tests.pipelines.test_selection import BAD, GOOD
from tests.postgres import fresh_databases, why_unavailable


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path, monkeypatch, postgres_url) -> str:
    """An empty tracking store of each kind."""
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        return empty_tracking_store(tmp_path / "mlflow.db")
    if postgres_url is None:
        pytest.skip(f"PostgreSQL unavailable: {why_unavailable()}")
    # a new name each time: MLflow keeps one store per URL in the process, with its tables known
    (url,) = fresh_databases(postgres_url, f"promotion_{uuid.uuid4().hex[:8]}")
    return url


# One interpreter imports the CLI and what its commands import when they run (torch, Lightning,
# MLflow and its SQL stores: seconds of CPU each time), builds the index of installed packages
# MLflow checks a model's requirements against (seconds more, cached per process), then forks a
# process per command line in argv[1] (JSON). They start together once the parent closes its end
# of a pipe, each writing its output to forked-N.out in the working directory; the parent prints
# their exit codes, as JSON.
FORKING_CLI = """
import gc, importlib, json, os, sys
from mlflow.utils.requirements_utils import _init_modules_to_packages_map
from pipelines.cli import main
for module in ["pipelines.tracking", "mlflow.store.tracking.sqlalchemy_store",
               "mlflow.store.model_registry.sqlalchemy_store", *sys.argv[2:]]:
    importlib.import_module(module)
_init_modules_to_packages_map()
gc.freeze()  # the children's collections leave the parent's objects (and their pages) alone
go, start = os.pipe()
children = []
for index, args in enumerate(json.loads(sys.argv[1])):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(start)
        os.read(go, 1)  # end of file: every process is forked, all start at once
        output = os.open(f"forked-{index}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(output, 1)
        os.dup2(output, 2)
        sys.argv = ["forecast", *args]
        main()
        sys.exit(0)
    children.append(pid)
os.close(start)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]))
"""


def forked_commands(
    cwd: Path, commands: list[list[str]], preload: list[str], env: dict[str, str] | None = None
) -> list[tuple[int, str]]:
    """Run ``forecast`` command lines as processes at once, forked from one that imported the CLI
    and ``preload`` (FORKING_CLI): a race between processes, paying the imports once, not once
    per process. Each one's exit code and output (stdout and stderr)."""
    launcher = subprocess.run(
        [sys.executable, "-c", FORKING_CLI, json.dumps(commands), *preload],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert launcher.returncode == 0, launcher.stderr[-3000:]
    codes = json.loads(launcher.stdout.strip().splitlines()[-1])
    return [(code, (cwd / f"forked-{index}.out").read_text()) for index, code in enumerate(codes)]


def held_in_a_thread(name: str, uri: str) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread holding ``name``'s lock until its ``release`` event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with promotion_lock(name, uri):
            held.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(60)
    return thread, held, release


def test_a_second_promotion_waits_for_the_first_and_gives_up_by_name(store):
    thread, _, release = held_in_a_thread("stations", store)
    try:
        refused = pytest.raises(LockError, match="another promotion of 'stations'")
        with refused, promotion_lock("stations", store, wait_s=0.5):
            pass
        with promotion_lock("prices", store, wait_s=5):  # another model is not held up
            pass
    finally:
        release.set()
        thread.join(60)
    with promotion_lock("stations", store, wait_s=5) as kind:  # free again
        assert kind.startswith("file lock" if store.startswith("sqlite") else "postgresql advisory lock")


@pytest.fixture
def registry(tmp_path, monkeypatch) -> mlflow.MlflowClient:
    """An SQLite registry holding the model "stations", standing in for an HTTP server's."""
    monkeypatch.chdir(tmp_path)
    mlflow.set_tracking_uri(empty_tracking_store(tmp_path / "mlflow.db"))
    client = mlflow.MlflowClient()
    client.create_registered_model("stations")
    return client


@pytest.mark.slow  # waits out a lease (LEASE_S) by design: in make test, not make test-fast
def test_a_tag_lease_is_taken_over_only_when_it_stops_changing(registry, monkeypatch):
    """The lease an HTTP tracking server gets: no clocks of two machines compared, and a tag that
    is not a lease at all (written by hand) does not crash anyone."""
    client = registry
    monkeypatch.setattr(locks, "LEASE_S", 3.0)
    monkeypatch.setattr(locks, "RENEW_S", 0.5)
    monkeypatch.setattr(locks, "SETTLE_S", 0.1)
    client.set_registered_model_tag("stations", locks.TAG, "garbage, not a lease")  # a dead holder's
    lease = model_tag(client, "stations")
    asked = time.monotonic()
    with tag_lease(lease, "promotion of 'stations'", wait_s=20):
        assert time.monotonic() - asked >= 3.0  # only once it stayed unchanged for LEASE_S
        assert client.get_registered_model("stations").tags[locks.TAG] != "garbage, not a lease"
        refused = pytest.raises(LockError, match="another promotion of 'stations'")
        with refused, tag_lease(lease, "promotion of 'stations'", wait_s=5):  # renewed: never taken over
            pass
    assert locks.TAG not in client.get_registered_model("stations").tags


def test_a_holder_whose_lease_was_taken_stops_renewing_and_is_told(registry, monkeypatch):
    client = registry
    monkeypatch.setattr(locks, "RENEW_S", 0.2)
    monkeypatch.setattr(locks, "SETTLE_S", 0.05)
    lease = model_tag(client, "stations")
    with pytest.raises(LockError, match="was lost"), tag_lease(lease, "promotion of 'stations'", wait_s=5):
        client.set_registered_model_tag("stations", locks.TAG, "someone-else 0")  # as a takeover does
        deadline = time.monotonic() + 60
        while any(t.name == locks.RENEWER for t in threading.enumerate()):  # it notices, and stops
            assert time.monotonic() < deadline, "the renewer went on"
            time.sleep(0.05)
    assert client.get_registered_model("stations").tags[locks.TAG] == "someone-else 0"  # not fought over


@pytest.mark.slow
def test_four_promotions_at_once_leave_the_best_version_holding_the_alias(store, tmp_path):
    """Four processes racing: the holder, a better version, a worse one and one as good as the
    better (not lower, so it must not move the alias again). The candidates are trained here,
    in-process; only the promotions race, as processes forked once the CLI is imported."""
    bad = train_json(store, *BAD, register="race")  # v1 holds @champion
    good = train_json(store, *GOOD, register="race")  # v2, better on the selection window
    mlflow.set_tracking_uri(store)
    client = mlflow.MlflowClient()
    for run in (bad, good):  # v3, v4
        mlflow.register_model(f"runs:/{run['run_id']}/model", "race")
    client.set_registered_model_alias("race", "champion", "1")
    promote = ["promote", "--name", "race", "--tracking-uri", store, "--allow-worse-than-naive"]
    commands = [[*promote, "--version", str(version)] for version in range(1, 5)]
    raced = forked_commands(tmp_path, commands, ["pipelines.registry"], env={"PYTHONWARNINGS": "ignore"})
    outputs = [output for _, output in raced]
    for code, output in raced:
        assert code in (0, 1), output
        assert "Traceback" not in output, output
        assert "race v" in output.strip().splitlines()[-1], output  # its decision, in one line
    champion = client.get_model_version_by_alias("race", "champion")
    assert champion.run_id == good["run_id"], outputs
    moved = [output for output in outputs if "@champion moved" in output]
    assert len(moved) == 1, outputs  # the first good one; the equal ones after it are not lower
