"""Promotions take turns on the tracking backend's own lock (pipelines/locks.py): a file
lock beside SQLite, an advisory lock in PostgreSQL, a renewed tag lease elsewhere; and four
`forecast promote` processes at once leave the best version holding the alias."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import mlflow
import pytest

import pipelines.locks as locks
from pipelines.locks import LockError, model_tag, promotion_lock, tag_lease
from tests.pipelines.helpers import train_json
from tests.pipelines.test_selection import BAD, GOOD
from tests.postgres import fresh_databases, why_unavailable


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path, monkeypatch, postgres_url) -> str:
    """An empty tracking store of each kind."""
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'mlflow.db'}"
    if postgres_url is None:
        pytest.skip(f"PostgreSQL unavailable: {why_unavailable()}")
    # a new name each time: MLflow keeps one store per URL in the process, with its tables known
    (url,) = fresh_databases(postgres_url, f"promotion_{uuid.uuid4().hex[:8]}")
    return url


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
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
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
def test_four_promotions_at_once_leave_the_best_version_holding_the_alias(store):
    """Four processes racing: the holder, a better version, a worse one and one as good as the
    better (not lower, so it must not move the alias again)."""
    bad = train_json(store, *BAD, register="race")  # v1 holds @champion
    good = train_json(store, *GOOD, register="race")  # v2, better on the selection window
    mlflow.set_tracking_uri(store)
    client = mlflow.MlflowClient()
    for run in (bad, good):  # v3, v4
        mlflow.register_model(f"runs:/{run['run_id']}/model", "race")
    client.set_registered_model_alias("race", "champion", "1")
    command = [sys.executable, "-m", "pipelines.cli", "promote", "--name", "race", "--tracking-uri", store,
               "--allow-worse-than-naive"]  # fmt: skip
    workers = [
        subprocess.Popen(
            [*command, "--version", str(version)],
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for version in range(1, 5)
    ]
    outputs = [worker.communicate(timeout=600)[0] for worker in workers]
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode in (0, 1), output
        assert "Traceback" not in output, output
        assert "race v" in output.strip().splitlines()[-1], output  # its decision, in one line
    champion = client.get_model_version_by_alias("race", "champion")
    assert champion.run_id == good["run_id"], outputs
    moved = [output for output in outputs if "@champion moved" in output]
    assert len(moved) == 1, outputs  # the first good one; the equal ones after it are not lower
