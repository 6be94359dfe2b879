"""A real MLflow store with real tiny models, trained once per session, for the HTTP tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pipelines.config import load_run_config
from pipelines.train import run_training
from service.main import create_app
from service.settings import ServiceSettings
from tests.conftest import FAMILIES as FAMILIES_BASE
from tests.conftest import TINY

FAMILIES = {
    **{
        name: FAMILIES_BASE[name]
        for name in ("rnn", "lstm", "gru", "bi-lstm", "seq2seq", "seq2seq-attention")
    },
    "ibm-ohlcv": ["data.dataset=ibm", "data.covariates=[Open,High,Low,Volume]"],
    "calendar": ["data.calendar_features=true", "model.architecture=seq2seq"],
}


@pytest.fixture(scope="session")
def model_store(tmp_path_factory) -> str:
    """Tracking URI of a SQLite store holding `svc-<family>` @champion for every family."""
    root: Path = tmp_path_factory.mktemp("service-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    import os

    cwd = os.getcwd()
    os.chdir(root)  # artifacts go to root/mlartifacts
    try:
        for family, settings in FAMILIES.items():
            config = load_run_config(None, [*TINY, *settings, f"tracking.registered_model=svc-{family}"])
            run_training(config, uri)
    finally:
        os.chdir(cwd)
    return uri


@contextmanager
def serving(tracking_uri: str, model: str, **overrides) -> Iterator[TestClient]:
    settings = ServiceSettings(
        mlflow_tracking_uri=tracking_uri, model_uri=model, reload_interval_s=0, **overrides
    )
    with TestClient(create_app(settings)) as client:
        yield client
