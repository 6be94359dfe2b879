"""`train.ema_decay`: early stopping judges the averaged weights, the model handed back is the
best epoch's average (not the raw weights), and a run interrupted mid-way resumes to the very
model an uninterrupted run makes."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.training import train_model
from tests.forecaster.conftest import tiny_gru_config


def config(**train) -> ForecastConfig:
    return tiny_gru_config(
        **{
            "epochs": 4,
            "patience": 10,
            "batch_size": 64,
            "limit_train_batches": 6,
            "learning_rate": 1e-2,
            "ema_decay": 0.9,
            **train,
        }
    )


class RawWeights(pl.Callback):
    """The module's own (raw, not averaged) weights at the end of every epoch."""

    def __init__(self) -> None:
        self.by_epoch: dict[int, dict[str, torch.Tensor]] = {}

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.by_epoch[trainer.current_epoch] = {k: v.clone() for k, v in pl_module.state_dict().items()}


class Crash(pl.Callback):
    """Fails as epoch ``epoch`` starts its first batch (its last.ckpt already written)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.current_epoch == self.epoch:
            raise RuntimeError("machine lost")


def val_mse(network: torch.nn.Module, prepared) -> float:
    """MSE over every validation window, on the scaled values the loss is computed on."""
    windows = prepared.windows("val", scaled=True)
    network.eval()
    with torch.no_grad():
        out = network(torch.as_tensor(windows.past(), dtype=torch.float32))
    return float(((out.mean - torch.as_tensor(windows.target(), dtype=torch.float32)) ** 2).mean())


def test_early_stopping_judges_and_returns_the_averaged_weights(tmp_path):
    # a learning rate this high makes validation peak before the last epoch, so returning the
    # last average instead of the best epoch's would show
    cfg = config(ema_decay=0.5, learning_rate=0.3, epochs=6)
    prepared = prepare_series(load_from_config(cfg.data), cfg)
    raw = RawWeights()
    trained = train_model(cfg, prepared, callbacks=[raw], checkpoint_dir=tmp_path)
    best = torch.load(tmp_path / "best.ckpt", weights_only=True)
    assert best["epoch"] < cfg.train.epochs - 1, "the best epoch is the last: the test shows nothing"
    returned = {f"network.{k}": v for k, v in trained.predictor.network.state_dict().items()}
    assert all(torch.equal(returned[k], best["state_dict"][k]) for k in returned)
    raw_then = raw.by_epoch[best["epoch"]]
    assert any(not torch.equal(returned[k], raw_then[k]) for k in returned), "the raw weights were kept"
    # the val_loss early stopping ranked epochs by is the returned (averaged) network's
    assert val_mse(trained.predictor.network, prepared) == pytest.approx(trained.best_val_loss, rel=1e-4)


def test_an_interrupted_run_with_averaging_resumes_to_the_uninterrupted_model(tmp_path):
    cfg = config()
    prepared = prepare_series(load_from_config(cfg.data), cfg)
    with pytest.raises(RuntimeError, match="machine lost"):
        train_model(cfg, prepared, callbacks=[Crash(epoch=2)], checkpoint_dir=tmp_path / "crashed")
    resumed = train_model(cfg, prepared, checkpoint_dir=tmp_path / "crashed", resume=True)
    fresh = train_model(cfg, prepared, checkpoint_dir=tmp_path / "fresh")
    mine, theirs = resumed.predictor.network.state_dict(), fresh.predictor.network.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert resumed.best_val_loss == fresh.best_val_loss


def test_a_decay_of_one_or_more_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="ema_decay"):
        config(ema_decay=1.0)
