"""Checkpoints that outlive the process: the full trainer state after every epoch (``last.ckpt``)
and the best-val weights (``best.ckpt``), each handed to a ``publish`` hook (pipelines logs them
as MLflow artifacts, so a run killed with SIGKILL can be resumed, from another machine too).

``last.ckpt`` is written when the next epoch starts, not when the previous one ends: Lightning
steps the LR scheduler and logs the epoch's train metrics after ``on_train_epoch_end``, so only
at the next start is the epoch fully done, and a restart from there replays nothing. It carries
the RNG states too (forecaster/rng.py), set back as it is loaded: nothing draws before the
resumed epoch's loader.
Lightning's own end-of-epoch restart would run the epoch-end hooks twice (early stopping counts
the epoch again) and skip the scheduler step."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint

from forecaster import rng

LAST = "last.ckpt"
BEST = "best.ckpt"

# publish(path, epochs_done): called on global rank zero once a file is complete on disk
Publish = Callable[[Path, int], None]
# the weights a best checkpoint keeps, when not the module's own (an average of them)
Weights = Callable[[], dict[str, torch.Tensor]]


class EpochCheckpoint(Checkpoint):
    """A ``Checkpoint`` (Lightning orders those after EarlyStopping and the rest, and adds no
    default ModelCheckpoint beside it). The best epoch is the first with the lowest ``monitor``
    (NaN counts as +inf), as ModelCheckpoint(save_top_k=1) would choose. ``weights`` gives the
    weights that epoch was validated with when they are not the module's (forecaster/averaging.py:
    validation sees the averaged weights, the module holds the raw ones again by epoch end)."""

    def __init__(
        self,
        directory: str | Path,
        publish: Publish | None = None,
        monitor: str = "val_loss",
        weights: Weights | None = None,
    ):
        self.directory = Path(directory)
        self.publish = publish
        self.monitor = monitor
        self.weights = weights
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        self._resumed = False  # loaded from a checkpoint, the resumed epoch not yet started

    @property
    def last_path(self) -> Path:
        return self.directory / LAST

    @property
    def best_path(self) -> Path:
        return self.directory / BEST

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score, "best_epoch": self.best_epoch, "rng": rng.capture()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_score = state_dict["best_score"]
        self.best_epoch = state_dict["best_epoch"]
        # now: Lightning builds the resumed epoch's loader (which draws seeds) before on_train_start
        rng.restore(state_dict["rng"])
        self._resumed = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Lightning takes batch counters saved at an epoch's start for an epoch that already ran
        them all (it would skip the epoch): on a resume the epoch loop starts afresh instead."""
        if self._resumed:
            epoch_loop = trainer.fit_loop.epoch_loop
            epoch_loop.reset_restart_stage()
            epoch_loop.restarting = False

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._resumed:  # this very state is the checkpoint resumed from; the RNG moved on since
            self._resumed = False
            return
        if trainer.current_epoch > 0:
            self._save(trainer, self.last_path, full=True)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        score = float(trainer.callback_metrics[self.monitor])
        score = math.inf if math.isnan(score) else score
        if self.best_score is None or score < self.best_score:
            self.best_score, self.best_epoch = score, trainer.current_epoch
            self._save(trainer, self.best_path, full=False)

    def _save(self, trainer: pl.Trainer, path: Path, full: bool) -> None:
        """Every rank takes part (``save_checkpoint`` holds a barrier), global rank zero writes and
        publishes. Written beside and renamed, so a kill never leaves a torn file."""
        partial = path.with_suffix(".partial")
        if full:
            trainer.save_checkpoint(partial)
        elif trainer.is_global_zero:
            if self.weights is not None:
                weights = self.weights()
            else:
                weights = {k: v.detach().cpu() for k, v in trainer.lightning_module.state_dict().items()}
            torch.save({"state_dict": weights, "epoch": trainer.current_epoch}, partial)
        if not trainer.is_global_zero:
            return
        partial.replace(path)
        if self.publish is not None:
            epochs_done = trainer.current_epoch if full else trainer.current_epoch + 1
            self.publish(path, epochs_done)

    def best_state_dict(self) -> dict[str, torch.Tensor] | None:
        """The best epoch's weights, on rank zero once any epoch was validated."""
        if not self.best_path.exists():
            return None
        return torch.load(self.best_path, map_location="cpu", weights_only=True)["state_dict"]
