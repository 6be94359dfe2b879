"""Under DDP every rank leaves the process group once fit returns: a gloo group left to
interpreter exit aborts a worker now and then, and Lightning's observer then kills rank zero while
it logs the run (tests/pipelines/test_ddp.py runs two real ranks)."""

from __future__ import annotations

import os

import pytest
import pytorch_lightning as pl
import torch

from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.training import train_model
from tests.forecaster.conftest import tiny_gru_config


@pytest.fixture
def own_environment():
    """Lightning's DDP writes LOCAL_RANK, NODE_RANK and MASTER_PORT into this process's
    environment; a later test's `forecast train --strategy ddp` subprocess inheriting them would
    take itself for an already launched rank and wait for a world that never comes."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_training_under_ddp_leaves_the_process_group_it_joined(tmp_path, own_environment):
    config = tiny_gru_config(
        epochs=1, batch_size=64, limit_train_batches=2, accelerator="cpu", devices=1, strategy="ddp"
    )
    joined: list[bool] = []

    class SeesGroup(pl.Callback):
        def on_train_start(self, trainer, pl_module) -> None:
            joined.append(torch.distributed.is_initialized())

    prepared = prepare_series(load_from_config(config.data), config)
    trained = train_model(config, prepared, callbacks=[SeesGroup()], checkpoint_dir=tmp_path)
    assert joined == [True]  # fit ran inside a process group ...
    assert not torch.distributed.is_initialized()  # ... and training left it
    assert trained.is_global_zero and trained.epochs_run == 1
