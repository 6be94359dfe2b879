"""Shared fixtures: a throwaway MLflow store per test, and the tiny settings tests train with."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # never write to a developer's real store

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "pipelines" / "configs"

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
