"""The epoch's train and validation loss and MAE, logged once per epoch instead of per batch.

``self.log(..., on_epoch=True)`` in a step costs about 1 ms per call on CPU (Lightning moves its
result metric to the value's device and walks the batch for its size at every call): for a small
GRU that was 14% of an epoch, measured against the plain-torch floor of
benchmarks/panel_bench.py. This callback sums the steps' values (weighted by batch size, on the
values' device, no host sync) and logs each mean once, with the same names and meaning as
before: ``train_loss``, ``train_mae``, ``val_loss``, ``val_mae``, reduced across DDP ranks.

It must come first among the trainer's callbacks: the others (progress lines, early stopping,
checkpoints, the sweep's pruner) read these metrics in the same epoch-end hooks."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch


class EpochMeans(pl.Callback):
    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}  # stage -> (loss * B, mae * B, B), summed

    def _add(self, stage: str, outputs: Any, batch: dict[str, torch.Tensor]) -> None:
        if not isinstance(outputs, dict) or "mae" not in outputs:
            return
        size = batch["target"].shape[0]
        values = torch.stack([outputs["loss"].detach(), outputs["mae"].detach(), outputs["mae"].new_ones(())])
        self._sums[stage] = self._sums.get(stage, 0) + values * size

    def _log(self, trainer: pl.Trainer, module: pl.LightningModule, stage: str) -> None:
        sums = self._sums.pop(stage, None)
        if sums is None:
            return
        sums = trainer.strategy.reduce(sums, reduce_op="sum")  # every rank's windows
        loss, mae = sums[:2] / sums[2]
        # the same on every rank now; sync_dist (a mean of equal values, once per epoch) only
        # keeps Lightning from warning that an epoch metric was not synchronised
        module.log(f"{stage}_loss", loss, prog_bar=True, sync_dist=True)
        module.log(f"{stage}_mae", mae, prog_bar=stage == "val", sync_dist=True)

    def on_train_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._sums.pop("train", None)

    def on_validation_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._sums.pop("val", None)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self._add("train", outputs, batch)

    def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._add("val", outputs, batch)

    def on_train_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._log(trainer, module, "train")

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._log(trainer, module, "val")
