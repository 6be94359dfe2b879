"""A real MLflow store with real tiny models, trained once per session, for the HTTP tests."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pipelines.config import load_run_config
from pipelines.train import run_training
from service.main import create_app
from service.settings import ServiceSettings
from tests.conftest import FAMILIES as FAMILIES_BASE
from tests.conftest import NAIVE_GATE_OFF, TINY, free_port

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
    """Tracking URI of a SQLite store holding `svc-<family>` @champion for every family."""
    root: Path = tmp_path_factory.mktemp("service-store")
    return train_registered(
        root, {f"svc-{family}": [*TINY, *settings] for family, settings in FAMILIES.items()}
    )


def train_registered(root: Path, models: dict[str, list[str]]) -> str:
    """Trains and registers each named model (``--set`` overrides) into a SQLite store in ``root``
    (artifacts under it too), each holding @champion even when worse than naive (these tests serve
    models, they do not judge them); returns the store's tracking URI."""
    uri = f"sqlite:///{root / 'mlflow.db'}"
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
