"""What `forecast train`, `backtest` and `sweep` show while they run, and `--quiet`."""

from __future__ import annotations

import io
import json
import math
import re
import time
from datetime import datetime
from pathlib import Path

import optuna
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping
from rich.console import Console
from torch.utils.data import DataLoader, TensorDataset

from forecaster.checkpoints import LAST, EpochCheckpoint
from forecaster.config import SplitConfig
from pipelines.backtest import fold_line
from pipelines.progress import EpochProgress, duration_words, time_left
from pipelines.sweep import trial_line
from tests.pipelines.helpers import forecast, tiny_settings

EPOCH_LINE = re.compile(
    r"^epoch (\d+)/2  train_loss \d+\.\d{4}  val_loss \d+\.\d{4}  best \d+\.\d{4} \(epoch \d+\)  "
    r"patience \d+/5  \d+\.\d s(  ~\d+ s left \(at most\))?$"
)


def epoch_lines(output: str) -> list[re.Match]:
    return [m for line in output.splitlines() if (m := EPOCH_LINE.match(line))]


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_train_prints_one_line_per_epoch_and_quiet_silences_it(tracking_uri):
    shown = forecast("train", *tiny_settings(), "--tracking-uri", tracking_uri)
    assert shown.exit_code == 0, shown.output
    lines = epoch_lines(shown.stdout)
    assert [int(m.group(1)) for m in lines] == [1, 2], shown.stdout  # one per epoch, in order
    assert [bool(m.group(2)) for m in lines] == [True, False]  # time left after epoch 1, none at the end
    assert not [
        line for line in shown.stdout.splitlines() if line.startswith("epoch ") and not EPOCH_LINE.match(line)
    ]

    quiet = forecast("train", *tiny_settings(), "--quiet", "--json", "--tracking-uri", tracking_uri)
    assert quiet.exit_code == 0, quiet.output
    assert not [line for line in quiet.output.splitlines() if line.startswith("epoch ")], quiet.output
    assert json.loads(quiet.stdout.strip().splitlines()[-1])["run_id"]


def test_time_left_is_the_epochs_left_at_the_mean_epoch_time_so_far():
    assert time_left([10.0, 14.0], epochs_left=18) == 18 * 12.0
    assert time_left([10.0], epochs_left=0) == 0.0  # the last epoch: nothing to wait for
    assert [duration_words(s) for s in (12.3, 100, 180, 7500)] == [
        "~12 s",
        "~1 min 40 s",
        "~3 min",
        "~2 h 5 min",
    ]


def test_the_first_epoch_line_says_the_most_time_left():
    trainer = pl.Trainer(max_epochs=10, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    progress = EpochProgress(live=False)
    progress._epoch_started = time.perf_counter() - 20.0  # as if epoch 1 started 20 s ago
    line = progress.epoch_line(trainer)
    assert line.startswith("epoch 1/10  train_loss -  val_loss -  best - (epoch -)  ")
    # 9 epochs left at 20 s each (a few tenths more if this process is held up in between)
    assert re.search(r"  20\.\d s  ~3 min( \d s)? left \(at most\)$", line), line


class ScriptedValLoss(pl.LightningModule):
    """A model whose val_loss is ``val_losses[epoch]``: which epochs improve, and so what early
    stopping does, is known in advance, with no real training."""

    def __init__(self, val_losses: list[float]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.val_losses = val_losses

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return (self.weight * batch[0]).sum()

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self.val_losses[self.current_epoch])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.ones(1, 1)))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.ones(1, 1)))


STATE = re.compile(r"^(epoch \d+/\d+) .*  (best \S+ \(epoch \S+\)  patience \d+/\d+)  ")


def shown_states(
    val_losses: list[float],
    patience: int,
    epochs: int | None = None,
    checkpoints: Path | None = None,
    resume: bool = False,
    lines: list[str] | None = None,
    **stopping: bool | None,
) -> list[str]:
    """Fit ScriptedValLoss with early stopping and the epoch lines; each line's epoch, best and
    patience (the seconds differ from run to run). With ``checkpoints``, the run's checkpoints
    (forecaster/checkpoints.py) go there, and ``resume`` continues from its last.ckpt."""
    shown = io.StringIO()
    console = Console(file=shown, width=400)
    callbacks: list[pl.Callback] = [
        EarlyStopping("val_loss", patience=patience, **stopping),
        EpochProgress(console, live=False),
    ]
    if checkpoints is not None:
        callbacks.append(EpochCheckpoint(checkpoints))
    trainer = pl.Trainer(
        max_epochs=epochs or len(val_losses),
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=checkpoints is not None,
        enable_model_summary=False,
        default_root_dir=checkpoints,
    )
    last = None if checkpoints is None or not resume else checkpoints / LAST
    trainer.fit(ScriptedValLoss(val_losses), ckpt_path=last)
    if lines is not None:
        lines.extend(line for line in shown.getvalue().splitlines() if line.startswith("epoch "))
    return [" ".join(m.groups()) for line in shown.getvalue().splitlines() if (m := STATE.match(line))]


# improves at epochs 1, 2 and 4, then waits 3 epochs in vain: early stopping ends it after epoch 7
LOSSES = [0.5, 0.3, 0.4, 0.25, 0.35, 0.3, 0.26, 0.1]


# None: the stopper checks at the train epoch's end, after the line's callback; False: after validation
@pytest.mark.parametrize("at_epoch_end", [None, False])
def test_patience_is_what_early_stopping_has_left_after_the_epoch(at_epoch_end):
    states = shown_states(LOSSES, patience=3, check_on_train_epoch_end=at_epoch_end)
    assert states == [
        "epoch 1/8 best 0.5000 (epoch 1)  patience 3/3",
        "epoch 2/8 best 0.3000 (epoch 2)  patience 3/3",
        "epoch 3/8 best 0.3000 (epoch 2)  patience 2/3",
        "epoch 4/8 best 0.2500 (epoch 4)  patience 3/3",
        "epoch 5/8 best 0.2500 (epoch 4)  patience 2/3",
        "epoch 6/8 best 0.2500 (epoch 4)  patience 1/3",
        "epoch 7/8 best 0.2500 (epoch 4)  patience 0/3",  # the line of the epoch that ends training
    ]


def test_the_line_of_the_epoch_early_stopping_ends_on_promises_no_time_left():
    lines: list[str] = []
    shown_states(LOSSES, patience=3, lines=lines)
    assert "left (at most)" in lines[-2]  # epoch 6 of 8: two more may come
    assert lines[-1].startswith("epoch 7/8") and "left" not in lines[-1]  # training ends here


def test_a_non_finite_val_loss_ends_training_at_patience_zero():
    states = shown_states([0.5, math.nan, 0.1], patience=3)
    assert states[-1] == "epoch 2/3 best 0.5000 (epoch 1)  patience 0/3"


def test_a_resumed_run_shows_the_best_and_patience_of_an_uninterrupted_one(tmp_path):
    """Stopped during epoch 6 (its last.ckpt holds 5 epochs, best at epoch 4), then resumed: the
    resumed lines read as the uninterrupted run's, best at epoch 4, patience counting from it."""
    uninterrupted = shown_states(LOSSES, patience=3)
    shown_states(LOSSES, patience=3, epochs=6, checkpoints=tmp_path)
    resumed = shown_states(LOSSES, patience=3, checkpoints=tmp_path, resume=True)
    assert resumed == uninterrupted[5:]
    assert resumed == [
        "epoch 6/8 best 0.2500 (epoch 4)  patience 1/3",
        "epoch 7/8 best 0.2500 (epoch 4)  patience 0/3",
    ]


def test_backtest_line_per_fold():
    split = SplitConfig(
        val_start=datetime(1989, 1, 1), test_start=datetime(1989, 5, 1), end=datetime(1990, 1, 1)
    )
    metrics = {"model": {"mae": 1.731}, "naive": {"mae": 2.041}}
    assert fold_line(2, 3, split, metrics, 8.14) == (
        "fold 2/3  test 1989-05-01 .. 1990-01-01  MAE 1.7310 (naive 2.0410, skill +0.152)  8.1 s"
    )


def test_sweep_line_per_trial_says_the_best_so_far():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize")
    for value in (0.5, 0.4):
        trial = study.ask()
        trial.set_user_attr("family", "gru")
        trial.set_user_attr("lookback", 14)
        study.tell(trial, value)
    pruned = study.ask()
    pruned.set_user_attr("pruned", "pruned at epoch 1")
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    first, second, third = study.trials
    assert trial_line(study, second, 2, 20, 4.21) == (
        "trial 1 [2/20]  selection MAE 0.4000 (gru, L=14)  best 0.4000 (trial 1)  4.2 s"
    )
    assert trial_line(study, third, 3, 20, 1.0) == (
        "trial 2 [3/20]  pruned (pruned at epoch 1)  best 0.4000 (trial 1)  1.0 s"
    )
