"""The one LightningModule: wraps any network, one shared step for train/val/test."""

from __future__ import annotations

from typing import Any, cast

import pytorch_lightning as pl
import torch
from torch import nn

from forecaster.models.quantiles import pinball_loss
from forecaster.models.series_embedding import run_network

LOSSES = {"mse": nn.MSELoss, "mae": nn.L1Loss, "huber": nn.HuberLoss}


class ForecastModule(pl.LightningModule):
    def __init__(
        self,
        network: nn.Module,
        loss: str = "mse",
        learning_rate: float = 1e-3,
        weight_decay: float = 1e-4,
        lr_schedule: str = "cosine",
        max_epochs: int = 20,
        teacher_forcing: float = 0.0,
        teacher_forcing_decay: float = 1.0,
        target_scale: float = 1.0,
        quantiles: list[float] | None = None,
    ) -> None:
        """``target_scale`` (the target's training std) turns scaled MAE into original units."""
        super().__init__()
        self.save_hyperparameters(ignore=["network"])
        self.network = network
        self.loss_fn = None if loss == "quantile" else LOSSES[loss]()
        self.register_buffer("quantile_levels", torch.tensor(quantiles or [], dtype=torch.float32))
        self.teacher_forcing_ratio = teacher_forcing

    def forward(self, past, future=None, target=None, teacher_forcing: float = 0.0):
        return self.network(past, future, target, teacher_forcing)

    def on_train_epoch_start(self) -> None:
        """Scheduled sampling: rely less on the true previous value as training goes on."""
        hp: Any = self.hparams  # Lightning's AttributeDict of the constructor's arguments
        self.teacher_forcing_ratio = hp.teacher_forcing * hp.teacher_forcing_decay**self.current_epoch
        self.log("teacher_forcing", self.teacher_forcing_ratio, on_step=False, on_epoch=True, sync_dist=True)

    def _step(self, batch: dict[str, torch.Tensor], stage: str) -> dict[str, torch.Tensor]:
        """The batch's loss (what is minimised) and MAE in the target's units; logged per epoch
        by forecaster/epoch_means.py."""
        training = stage == "train"
        target = batch["target"]  # (B, H)
        out = run_network(
            self.network, batch, target if training else None, self.teacher_forcing_ratio if training else 0.0
        )
        if self.loss_fn is None:
            loss = pinball_loss(out.quantiles, target, cast(torch.Tensor, self.quantile_levels))
        else:
            loss = self.loss_fn(out.mean, target)
        mae = (out.mean - target).abs().mean() * self.hparams["target_scale"]
        return {"loss": loss, "mae": mae}

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        return self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        step = self._step(batch, "test")
        size = len(batch["target"])
        self.log("test_loss", step["loss"], on_epoch=True, sync_dist=True, batch_size=size)
        self.log("test_mae", step["mae"], on_epoch=True, sync_dist=True, batch_size=size)
        return step

    def configure_optimizers(self):
        hp = self.hparams
        optimizer = torch.optim.AdamW(self.parameters(), lr=hp.learning_rate, weight_decay=hp.weight_decay)
        if hp.lr_schedule == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=hp.max_epochs)
            return {"optimizer": optimizer, "lr_scheduler": scheduler}
        if hp.lr_schedule == "plateau":
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"},
            }
        return optimizer
