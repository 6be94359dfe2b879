"""What `forecast train` shows while it trains: a live bar on a terminal, one plain line per epoch
otherwise (CI, docker logs). Either way each epoch ends in one line such as

    epoch 3/20  train_loss 0.4123  val_loss 0.3981  best 0.3981 (epoch 3)  patience 5/5  12.3 s

and, while epochs are left, ``~3 min 29 s left (at most)`` (patience: epochs early stopping still
waits for a better val_loss; seconds: that epoch's time; the time left, from the first epoch on:
the epochs left to ``train.epochs`` at the mean epoch time so far. "At most": early stopping may
end sooner, and a user deciding whether to wait needs the bound, not a guess at when patience
runs out). Only the global-zero process prints (DDP workers stay silent).

The line shows the state after that epoch: patience once early stopping has counted it (0 on
the line of the epoch that ends training), and after ``--resume`` the run's best, not this
process's (the same epochs that patience counts from)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ProgressBar
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from forecaster.checkpoints import EpochCheckpoint


def _value(trainer: pl.Trainer, key: str) -> float | None:
    value = trainer.callback_metrics.get(key)
    return None if value is None else float(value)


def _fmt(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.4f}"


def time_left(epoch_seconds: list[float], epochs_left: int) -> float:
    """The most the remaining epochs take at the mean epoch time so far (0 when none is left)."""
    if epochs_left <= 0 or not epoch_seconds:
        return 0.0
    return epochs_left * sum(epoch_seconds) / len(epoch_seconds)


def duration_words(seconds: float) -> str:
    """``~12 s``, ``~1 min 40 s``, ``~2 h 5 min``: the precision a wait is planned with."""
    whole = max(1, round(seconds))
    if whole < 60:
        return f"~{whole} s"
    if whole < 3600:
        return f"~{whole // 60} min" + (f" {whole % 60} s" if whole % 60 else "")
    minutes = round(seconds / 60)
    return f"~{minutes // 60} h {minutes % 60} min"


def patience_left(stopper: EarlyStopping, current: torch.Tensor | None) -> int:
    """Epochs ``stopper`` still waits for a better value once it has checked this epoch's
    ``current``. Checking at a train epoch's end (Lightning's default when validation runs once
    an epoch), it runs after every other callback there, the epoch line included, so its
    ``wait_count`` is still the previous epoch's: the line works out the check's result, as the
    stopper does. Checking after validation instead, it has already counted the epoch."""
    counted = not getattr(stopper, "_check_on_train_epoch_end", True)
    if counted or current is None:
        return max(stopper.patience - stopper.wait_count, 0)
    current = current.squeeze()
    if stopper.check_finite and not torch.isfinite(current):
        return 0  # the stopper ends training at once, whatever the patience
    improved = stopper.monitor_op(current - stopper.min_delta, stopper.best_score.to(current.device))
    return stopper.patience if improved else max(stopper.patience - stopper.wait_count - 1, 0)


def best_so_far(trainer: pl.Trainer) -> tuple[float, int] | None:
    """The run's best val_loss and its epoch (1-based) held by its checkpoint callback: on a
    resume, restored from the checkpoint, so they include the epochs before this process."""
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, EpochCheckpoint) and callback.best_epoch is not None:
            score = callback.best_score
            if score is not None and math.isfinite(score):
                return score, callback.best_epoch + 1
    return None


class EpochProgress(ProgressBar):
    """Lightning progress bar callback (it replaces Lightning's own bar)."""

    def __init__(self, console: Console | None = None, live: bool | None = None) -> None:
        super().__init__()
        if console is None:
            from pipelines.console import console as default_console

            console = default_console
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.enabled = True
        self.best: float | None = None
        self.best_epoch: int | None = None
        self._epoch_started = 0.0
        self._epoch_seconds: list[float] = []  # the epochs this process ran (a resumed run: since then)
        self._progress: Progress | None = None
        self._epochs_task: TaskID | None = None
        self._batches_task: TaskID | None = None

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    def _showing(self, trainer: pl.Trainer) -> bool:
        return self.enabled and trainer.is_global_zero

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        restored = best_so_far(trainer)  # resumed: the best may lie before this process
        if restored is not None:
            self.best, self.best_epoch = restored
        if not self._showing(trainer) or not self.live:
            return
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._epochs_task = self._progress.add_task("epochs", total=trainer.max_epochs, status="")
        self._batches_task = self._progress.add_task("batches", total=None, status="")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_started = time.perf_counter()
        if self._progress is not None and self._batches_task is not None:
            total = self.total_train_batches
            self._progress.reset(
                self._batches_task,
                total=None if math.isinf(total) else total,
                description=f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}",
            )

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._progress is not None and self._batches_task is not None:
            self._progress.update(self._batches_task, completed=batch_idx + 1)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._showing(trainer):
            return
        line = self.epoch_line(trainer)
        if self._progress is not None and self._epochs_task is not None:
            self._progress.update(
                self._epochs_task, completed=trainer.current_epoch + 1, status=f"best {_fmt(self.best)}"
            )
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def epoch_line(self, trainer: pl.Trainer) -> str:
        epoch = trainer.current_epoch + 1
        train_loss, val_loss = _value(trainer, "train_loss"), _value(trainer, "val_loss")
        if val_loss is not None and not math.isnan(val_loss) and (self.best is None or val_loss < self.best):
            self.best, self.best_epoch = val_loss, epoch
        parts = [
            f"epoch {epoch}/{trainer.max_epochs}",
            f"train_loss {_fmt(train_loss)}",
            f"val_loss {_fmt(val_loss)}",
            f"best {_fmt(self.best)} (epoch {self.best_epoch or '-'})",
        ]
        stopper = trainer.early_stopping_callback
        epochs_left = trainer.max_epochs - epoch
        if stopper is not None:
            waits = patience_left(stopper, trainer.callback_metrics.get(stopper.monitor))
            parts.append(f"patience {waits}/{stopper.patience}")
            epochs_left = epochs_left if waits > 0 else 0  # early stopping ends training here
        seconds = time.perf_counter() - self._epoch_started
        self._epoch_seconds.append(seconds)
        parts.append(f"{seconds:.1f} s")
        left = time_left(self._epoch_seconds, epochs_left)
        if left > 0:
            parts.append(f"{duration_words(left)} left (at most)")
        return "  ".join(parts)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._stop()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._stop()
