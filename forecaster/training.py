"""Fit one network with Lightning: early stopping and best-checkpoint restore on val loss,
gradient clipping, seeded. The caller passes a logger (pipelines passes MLflow's)."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping, ModelCheckpoint, ProgressBar
from pytorch_lightning.loggers import Logger

from forecaster.config import ForecastConfig
from forecaster.conformal import conformal_scores
from forecaster.data.datamodule import ForecastDataModule, PreparedSeries
from forecaster.models import build_network
from forecaster.module import ForecastModule
from forecaster.predictor import Predictor


@dataclass
class TrainedModel:
    predictor: Predictor
    best_val_loss: float
    epochs_run: int
    seconds: float
    is_global_zero: bool = True


def build_module(config: ForecastConfig, prepared: PreparedSeries) -> ForecastModule:
    calendar = 0 if prepared.calendar is None else prepared.calendar.shape[1]
    network = build_network(
        config.model,
        series_features=len(prepared.series.columns),
        calendar_features=calendar,
        horizon=config.window.horizon,
    )
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
        target_scale=float(prepared.scaler.std[0]),
        quantiles=config.model.quantiles,
    )


def calibrate_conformal(predictor: Predictor, prepared: PreparedSeries, levels: list[float]) -> None:
    """Split-conformal half-widths per horizon step from the selection windows: not the ones early
    stopping chose the checkpoint on (their residuals are too small), and never test."""
    windows = prepared.windows("selection")
    times = windows.past_times() if predictor.uses_calendar else None
    past = windows.past()
    forecast = predictor.predict(past, times).mean
    predictor.conformal = conformal_scores(
        windows.target(), forecast, past[:, :, 0], levels, predictor.volatility_span
    )


def train_model(
    config: ForecastConfig,
    prepared: PreparedSeries,
    logger: Logger | bool = False,
    callbacks: list[Callback] | None = None,
) -> TrainedModel:
    pl.seed_everything(config.train.seed, workers=True, verbose=False)
    torch.set_flush_denormal(True)  # tiny BPTT gradients turn denormal and slow CPUs ~5x
    module = build_module(config, prepared)
    data = ForecastDataModule(prepared, config.train.batch_size)
    with tempfile.TemporaryDirectory(prefix="forecaster-ckpt-") as checkpoint_dir:
        checkpoint = ModelCheckpoint(dirpath=checkpoint_dir, monitor="val_loss", save_top_k=1)
        trainer = pl.Trainer(
            max_epochs=config.train.epochs,
            accelerator=config.train.accelerator,
            devices=config.train.devices,
            num_nodes=config.train.num_nodes,
            strategy=config.train.strategy,
            gradient_clip_val=config.train.gradient_clip or None,
            deterministic="warn",
            logger=logger,
            callbacks=[
                EarlyStopping(monitor="val_loss", patience=config.train.patience),
                checkpoint,
                *(callbacks or []),
            ],
            limit_train_batches=config.train.limit_train_batches,
            # a caller's own ProgressBar callback replaces Lightning's default bar
            enable_progress_bar=config.train.progress_bar
            or any(isinstance(c, ProgressBar) for c in callbacks or []),
            enable_model_summary=False,
            default_root_dir=checkpoint_dir,
            log_every_n_steps=1,
        )
        started = time.perf_counter()
        trainer.fit(module, datamodule=data)
        seconds = time.perf_counter() - started
        best_path = checkpoint.best_model_path
        if best_path and trainer.is_global_zero:  # other ranks hand back nothing; rank 0 logs
            state = torch.load(best_path, map_location="cpu", weights_only=False)["state_dict"]
            module.load_state_dict(state)
        best = checkpoint.best_model_score
    predictor = Predictor(
        module.network.cpu(),
        config,
        prepared.scaler,
        features=prepared.series.columns,
        frequency=prepared.series.frequency,
    )
    if trainer.is_global_zero and not config.model.quantiles and config.intervals:
        calibrate_conformal(predictor, prepared, config.intervals)
    return TrainedModel(
        predictor=predictor,
        best_val_loss=float(best) if best is not None else float("nan"),
        epochs_run=trainer.current_epoch,
        seconds=seconds,
        is_global_zero=trainer.is_global_zero,
    )
