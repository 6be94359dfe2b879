"""What `forecast train` shows while it trains: a live bar on a terminal, one plain line per epoch
otherwise (CI, docker logs). Either way each epoch ends in one line such as

    epoch 3/20  train_loss 0.4123  val_loss 0.3981  best 0.3981 (epoch 3)  patience 5/5  12.3 s

and, while epochs are left, ``~3 min 29 s left (at most)`` (patience: epochs early stopping still
waits for a better val_loss; seconds: that epoch's time; the time left, from the first epoch on:
the epochs left to ``train.epochs`` at the mean epoch time so far. "At most": early stopping may
end sooner, and a user deciding whether to wait needs the bound, not a guess at when patience
runs out). Only the global-zero process prints (DDP workers stay silent)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ProgressBar
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
        if stopper is not None:
            parts.append(f"patience {stopper.patience - stopper.wait_count}/{stopper.patience}")
        seconds = time.perf_counter() - self._epoch_started
        self._epoch_seconds.append(seconds)
        parts.append(f"{seconds:.1f} s")
        left = time_left(self._epoch_seconds, trainer.max_epochs - epoch)
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
