"""A real MLflow store with real tiny models, trained once per session, for the HTTP tests."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from filelock import FileLock

from pipelines.config import load_run_config
from pipelines.train import run_training
from service.main import create_app
from service.settings import ServiceSettings
from tests.conftest import FAMILIES as FAMILIES_BASE
from tests.conftest import NAIVE_GATE_OFF, TINY, empty_tracking_store, free_port

FAMILIES = {
    **{
        name: FAMILIES_BASE[name]
        for name in ("rnn", "lstm", "gru", "bi-lstm", "seq2seq", "seq2seq-attention")
    },
    "ibm-ohlcv": ["data.dataset=ibm", "data.covariates=[Open,High,Low,Volume]"],
    # trained on a UTC clock (forecaster.data.clock), so it takes zone-aware timestamps
    "calendar": ["data.calendar_features=true", "model.architecture=seq2seq", "data.timezone=UTC"],
}


@pytest.fixture(scope="session")
def model_store(tmp_path_factory) -> str:
    """Tracking URI of a SQLite store holding `svc-<family>` @champion for every family.

    Trained once per run: under pytest-xdist the workers share one store, built by whichever
    asks first (a file lock in the run's base folder), since MLflow records its artifacts' absolute
    paths. Shared, it is read-only: a test that registers or promotes gets its own copy
    (``writable_store``)."""
    models = {f"svc-{family}": [*TINY, *settings] for family, settings in FAMILIES.items()}
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: nothing to share with
        return train_registered(tmp_path_factory.mktemp("service-store"), models)
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's
    root = shared / "service-store"
    with FileLock(str(shared / "service-store.lock")):
        done = root / "trained"
        if not done.exists():
            if root.exists():  # a worker failed half-way: start over
                shutil.rmtree(root)
            root.mkdir()
            done.write_text(train_registered(root, models))
        return done.read_text()


@pytest.fixture
def writable_store(model_store, tmp_path) -> str:
    """Tracking URI of a copy of ``model_store``'s database, for a test that registers or promotes:
    the same models (the copy points at the shared artifacts, which nothing writes)."""
    copy = tmp_path / "mlflow.db"
    source = sqlite3.connect(model_store.removeprefix("sqlite:///"))
    with closing(source), closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    return f"sqlite:///{copy}"


@pytest.fixture(scope="session")
def served(model_store) -> Iterator[Callable[[str], TestClient]]:
    """``served(name)``: a ready TestClient serving ``models:/<name>@champion`` from
    ``model_store`` with the default settings, started on first use and shared by the tests after
    (an app per model, not per test; the least recently used closes beyond ``SHARED_APPS``). Only
    for tests that send requests and read their answers: a test that counts /metrics, changes
    settings or the app's state, opens its own."""
    open_apps: OrderedDict[str, tuple[AbstractContextManager[TestClient], TestClient]] = OrderedDict()

    def client(name: str) -> TestClient:
        if name not in open_apps:
            while len(open_apps) >= SHARED_APPS:
                _, (oldest, _) = open_apps.popitem(last=False)
                oldest.__exit__(None, None, None)
            app = serving(model_store, f"models:/{name}@champion")
            open_apps[name] = (app, app.__enter__())
        open_apps.move_to_end(name)
        return open_apps[name][1]

    try:
        yield client
    finally:
        while open_apps:
            _, (app, _) = open_apps.popitem()
            app.__exit__(None, None, None)


SHARED_APPS = 4  # each holds a parser helper process


def train_registered(root: Path, models: dict[str, list[str]]) -> str:
    """Trains and registers each named model (``--set`` overrides) into a SQLite store in ``root``
    (artifacts under it too), each holding @champion even when worse than naive (these tests serve
    models, they do not judge them); returns the store's tracking URI."""
    uri = empty_tracking_store(root / "mlflow.db")
    cwd = os.getcwd()
    os.chdir(root)  # artifacts go to root/mlartifacts
    try:
        for name, settings in models.items():
            # exported to ONNX, as a CPU serves a registered model (INFERENCE_RUNTIME=auto)
            registered = [
                *settings,
                NAIVE_GATE_OFF,
                "tracking.onnx_export=true",
                f"tracking.registered_model={name}",
            ]
            run_training(load_run_config(None, registered), uri)
    finally:
        os.chdir(cwd)
    return uri


def wait_ready(client: TestClient, timeout: float = 60.0) -> None:
    """The model loads in the background after start-up: wait for /readyz."""
    deadline = time.monotonic() + timeout
    while (response := client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, f"not ready after {timeout} s: {response.text}"
        time.sleep(0.05)


@contextmanager
def serving(tracking_uri: str, model: str, ready: bool = True, **overrides) -> Iterator[TestClient]:
    """The app in a TestClient (lifespan run); with ``ready``, once its model is loaded."""
    settings = ServiceSettings(
        mlflow_tracking_uri=tracking_uri, model_uri=model, reload_interval_s=0, **overrides
    )
    with TestClient(create_app(settings)) as client:
        if ready:
            wait_ready(client)
        yield client


@contextmanager
def live_server(
    tracking_uri: str, model: str, graceful_s: float | None = None, **overrides
) -> Iterator[tuple[str, FastAPI]]:
    """The app under a real uvicorn on loopback, in a thread of this process (so a test can reach
    into app.state), for what a TestClient cannot do: chunked bodies, clients that hang up."""
    settings = ServiceSettings(
        mlflow_tracking_uri=tracking_uri, model_uri=model, reload_interval_s=0, **overrides
    )
    app = create_app(settings)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=graceful_s
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline and thread.is_alive(), "the live server did not get ready"
        time.sleep(0.05)
    app.state.server = server  # a test may stop it early
    try:
        yield url, app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
