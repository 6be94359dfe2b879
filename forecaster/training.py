"""Fit one network with Lightning: early stopping and best-checkpoint restore on val loss,
gradient clipping, optionally a moving average of the weights (forecaster/averaging.py), seeded,
a checkpoint after every epoch (forecaster/checkpoints.py) that a later call can resume from.
The caller passes a logger (pipelines passes MLflow's) and where the checkpoints go."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping, ProgressBar
from pytorch_lightning.loggers import Logger
from pytorch_lightning.utilities.exceptions import MisconfigurationException

from forecaster.averaging import AveragedWeights
from forecaster.checkpoints import LAST, EpochCheckpoint, Publish
from forecaster.config import ForecastConfig
from forecaster.conformal import calmest_volatility, conformal_scores, lookback_volatility
from forecaster.data.datamodule import ForecastDataModule, Prepared, PreparedPanel
from forecaster.data.frequency import seasonal_period
from forecaster.data.scaling import StandardScaler
from forecaster.epoch_means import EpochMeans
from forecaster.errors import ConfigError
from forecaster.evaluation import MODEL, Evaluation, evaluate, training_mase_scale
from forecaster.models import build_network
from forecaster.module import ForecastModule
from forecaster.predictor import SINGLE_SERIES, Predictor


@dataclass
class TrainingHooks:
    """What a caller adds to a training (``train_model``'s arguments beyond config and data):
    pipelines/train.py passes MLflow's logger, the epoch lines, the run's checkpoint folder and
    its publisher, and whether to resume; the Python API passes none."""

    logger: Logger | bool = False
    callbacks: list[Callback] = field(default_factory=list)
    checkpoint_dir: str | Path | None = None
    publish: Publish | None = None
    resume: bool = False
    progress: bool = True

    def arguments(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class TrainedModel:
    predictor: Predictor
    best_val_loss: float
    epochs_run: int
    seconds: float
    is_global_zero: bool = True


def leave_process_group() -> None:
    """Under DDP the ranks share nothing once fit returns (rank zero evaluates, logs and registers
    alone), so each leaves the process group here. Left to interpreter exit, gloo's threads abort
    a worker ("terminate called without an active exception"; 16 of 40 two-rank runs here), and
    Lightning's process observer then SIGKILLs rank zero in the middle of logging the run."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def lightning_trainer(config: ForecastConfig, **settings: Any) -> pl.Trainer:
    """``pl.Trainer``, with its refusal of the hardware settings (GPU indices on a CPU-only
    machine, an unknown accelerator or strategy) named as a config error, not a traceback."""
    try:
        return pl.Trainer(**settings)
    except (MisconfigurationException, TypeError, ValueError, ImportError) as exc:  # ImportError: tpu, hpu
        hardware = config.train
        raise ConfigError(
            f"train.accelerator={hardware.accelerator!r}, train.devices={hardware.devices!r}, "
            f"train.strategy={hardware.strategy!r}: {exc}"
        ) from None


def build_module(config: ForecastConfig, prepared: Prepared) -> ForecastModule:
    calendar = 0 if prepared.calendar is None else prepared.calendar.shape[1]
    network = build_network(
        config.model,
        series_features=len(prepared.series.columns),
        calendar_features=calendar,
        horizon=config.window.horizon,
        future_covariates=len(prepared.series.future_covariates),
        series_count=len(prepared.members) if isinstance(prepared, PreparedPanel) else 0,
        lookback=config.window.lookback,
        season=seasonal_period(prepared.series.frequency),
    )
    # val MAE in the target's units: a panel's series each have their own, so their mean
    target_scale = float(np.mean([part.scaler.std[0] for part in prepared.parts]))
    is_seq2seq = config.model.architecture == "seq2seq"
    return ForecastModule(
        network,
        loss=config.train.loss,
        learning_rate=config.train.learning_rate,
        weight_decay=config.train.weight_decay,
        lr_schedule=config.train.lr_schedule,
        max_epochs=config.train.epochs,
        teacher_forcing=config.model.teacher_forcing if is_seq2seq else 0.0,
        teacher_forcing_decay=config.model.teacher_forcing_decay,
        target_scale=target_scale,
        quantiles=config.model.quantiles,
    )


def calibrate_conformal(predictor: Predictor, prepared: Prepared, levels: list[float]) -> None:
    """Split-conformal half-widths per horizon step from the selection windows (of every series
    of a panel): not the ones early stopping chose the checkpoint on (their residuals are too
    small), and never test."""
    selection = evaluate(predictor, prepared, "selection")  # a panel's members forecast together
    predictor.conformal = conformal_scores(
        selection.actual, selection.forecasts[MODEL], selection.past_target, levels, predictor.volatility_span
    )
    predictor.volatility_floor = calmest_of(predictor, selection)
    if predictor.is_panel:  # a series it never saw has no stored scale: its look-back's volatility
        predictor.unseen_volatility_floor = calmest_volatility(
            selection.past_target, predictor.volatility_span, lookback_volatility(selection.past_target)
        )


def calmest_of(predictor: Predictor, selection: Evaluation) -> float | None:
    """The calmest selection window's volatility in its series' scale, over every series of a
    panel (``calmest_volatility``): the floor a forecast's window volatility is given."""
    parts = selection.per_series or {SINGLE_SERIES: selection}
    calmest = [
        calmest_volatility(part.past_target, predictor.volatility_span, target_scale_of(predictor, key))
        for key, part in parts.items()
    ]
    found = [value for value in calmest if value is not None]
    return min(found) if found else None


def target_scale_of(predictor: Predictor, series_id: str) -> float:
    """The training standard deviation a series' target is scaled by: its own in a panel."""
    scaler = predictor.series_scalers.get(series_id, predictor.scaler)
    return float(scaler.std[0])


def with_time_format_read(config: ForecastConfig, read_in: str | None) -> ForecastConfig:
    """``config`` with the day-month order its training file was read in (``data.time_format``,
    where none was given): a short file given to the model later may hold no day above 12 to
    decide the order by, and must not be read the other way round."""
    if config.data.time_format is not None or read_in is None:
        return config
    return config.model_copy(update={"data": config.data.model_copy(update={"time_format": read_in})})


def predictor_for(network: torch.nn.Module, config: ForecastConfig, prepared: Prepared) -> Predictor:
    """The trained network with its scaling: a single series' scaler, or a panel's per-series
    scalers (its ``scaler`` is then the pooled fit, used only to make plausible example windows)."""
    scaler = prepared.parts[0].scaler
    if isinstance(prepared, PreparedPanel):
        rows = [
            part.series.frame[part.series.columns].to_numpy()[: part.borders.train_end]
            for part in prepared.parts
        ]
        scaler = StandardScaler.fit(np.concatenate(rows))
    predictor = Predictor(
        network, config, scaler, features=prepared.series.columns, frequency=prepared.series.frequency
    )
    predictor.future_scaler = prepared.future_scaler
    predictor.clock = prepared.series.clock
    predictor.config = with_time_format_read(config, prepared.series.time_format)
    predictor.mase_scales = {
        part.series.series_id or SINGLE_SERIES: training_mase_scale(part) for part in prepared.parts
    }
    if isinstance(prepared, PreparedPanel):
        predictor.series_scalers = prepared.scalers()
    return predictor


def train_model(
    config: ForecastConfig,
    prepared: Prepared,
    logger: Logger | bool = False,
    callbacks: list[Callback] | None = None,
    checkpoint_dir: str | Path | None = None,
    publish: Publish | None = None,
    resume: bool = False,
    progress: bool = True,
) -> TrainedModel:
    """``checkpoint_dir`` keeps last.ckpt/best.ckpt (a temporary one when None); with ``resume``
    training continues from its last.ckpt: weights, optimizer, scheduler, epoch, early stopping,
    best epoch and RNG states, so the result equals an uninterrupted run's."""
    if checkpoint_dir is None:
        with tempfile.TemporaryDirectory(prefix="forecaster-ckpt-") as temporary:
            return train_model(config, prepared, logger, callbacks, temporary, publish, resume, progress)
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(config.train.seed, workers=True, verbose=False)
    torch.set_flush_denormal(True)  # tiny BPTT gradients turn denormal and slow CPUs ~5x
    module = build_module(config, prepared)
    data = ForecastDataModule(prepared, config.train.batch_size)
    averaging = AveragedWeights(config.train.ema_decay) if config.train.ema_decay else None
    best_weights = None if averaging is None else averaging.averaged_state_dict  # what validation saw
    checkpoint = EpochCheckpoint(directory, publish, weights=best_weights)
    trainer = lightning_trainer(
        config,
        max_epochs=config.train.epochs,
        accelerator=config.train.accelerator,
        devices=config.train.devices,
        num_nodes=config.train.num_nodes,
        strategy=config.train.strategy,
        gradient_clip_val=config.train.gradient_clip or None,
        deterministic="warn",
        logger=logger,
        callbacks=[
            EpochMeans(),  # first: the others read the epoch's losses it logs
            EarlyStopping(monitor="val_loss", patience=config.train.patience),
            *([averaging] if averaging else []),
            checkpoint,
            *(callbacks or []),
        ],
        limit_train_batches=config.train.limit_train_batches,
        # a caller's own ProgressBar callback replaces Lightning's default bar, which is shown
        # only on a terminal: elsewhere (CI, a pipe, docker logs) its frames are noise
        enable_progress_bar=any(isinstance(c, ProgressBar) for c in callbacks or [])
        or (progress and config.train.progress_bar and sys.stdout.isatty()),
        enable_model_summary=False,
        default_root_dir=directory,
        log_every_n_steps=1,
    )
    last = directory / LAST
    started = time.perf_counter()
    trainer.fit(module, datamodule=data, ckpt_path=last if resume and last.exists() else None)
    seconds = time.perf_counter() - started
    leave_process_group()
    best_state = checkpoint.best_state_dict() if trainer.is_global_zero else None
    if best_state is not None:  # other ranks hand back nothing; rank 0 logs
        module.load_state_dict(best_state)
    best = checkpoint.best_score
    predictor = predictor_for(module.network.cpu(), config, prepared)
    if trainer.is_global_zero and not config.model.quantiles and config.intervals:
        calibrate_conformal(predictor, prepared, config.intervals)
    return TrainedModel(
        predictor=predictor,
        best_val_loss=float(best) if best is not None else float("nan"),
        epochs_run=trainer.current_epoch,
        seconds=seconds,
        is_global_zero=trainer.is_global_zero,
    )
