"""Shared fixtures: a throwaway MLflow store per test, and the tiny settings tests train with."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # never write to a developer's real store

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "pipelines" / "configs"

# A model this tiny forecasts worse than naive (selection MAE 2.83 vs 2.70), and the promotion gate
# gives such a model no alias: tests that are not about that bar waive it (tests/pipelines/
# test_naive_gate.py drops this line to check the bar itself).
NAIVE_GATE_OFF = "tracking.allow_worse_than_naive=true"

# Tiny but real: a couple of epochs on Melbourne temperatures, seconds per model.
TINY = [
    "data.dataset=melbourne-temp",
    "window.lookback=14",
    "window.horizon=4",
    "model.hidden_size=8",
    "model.layers=1",
    "train.epochs=2",
    "train.batch_size=128",
    "train.limit_train_batches=4",
    "train.progress_bar=false",
    NAIVE_GATE_OFF,
]


# Every model family, as --set overrides on top of TINY.
FAMILIES = {
    "rnn": ["model.cell=rnn"],
    "lstm": ["model.cell=lstm"],
    "gru": ["model.cell=gru"],
    "bi-gru": ["model.cell=gru", "model.bidirectional=true"],
    "bi-lstm": ["model.cell=lstm", "model.bidirectional=true"],
    "seq2seq": ["model.architecture=seq2seq", "model.attention=none"],
    "seq2seq-attention": ["model.architecture=seq2seq", "model.attention=bahdanau"],
}


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch) -> str:
    """A SQLite store in a temporary working directory (artifacts land in its mlartifacts/)."""
    monkeypatch.chdir(tmp_path)
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_bin() -> Path:
    import sys

    return Path(sys.executable).parent


_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str | None]:
    """One PostgreSQL server for the session (None when its binaries are missing)."""
    from tests.postgres import postgres_server, why_unavailable  # it imports this module

    if why_unavailable() is not None:
        yield None
        return
    with postgres_server("postgres_tests") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path, postgres_url) -> str:
    """A URL where no log exists yet (the forecast log's tests): an SQLite file, or a new database
    of the session's PostgreSQL server."""
    import psycopg
    from sqlalchemy import make_url

    from tests.postgres import why_unavailable  # it imports this module: not at the top

    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'forecasts.db'}"
    if postgres_url is None:
        pytest.skip(f"PostgreSQL unavailable: {why_unavailable()}")
    name = f"log_{next(_databases)}"
    server = make_url(postgres_url)
    with psycopg.connect(host=server.host, port=server.port, user=server.username, dbname=server.database,
                         autocommit=True) as connection:  # fmt: skip
        connection.execute(f"CREATE DATABASE {name}")
    return str(server.set(database=name))
