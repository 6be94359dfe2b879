"""`forecast train`: load -> split -> train -> evaluate against baselines -> log -> register."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
import numpy as np
from pytorch_lightning.callbacks import Callback, LearningRateMonitor

from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.evaluation import MODEL, evaluate
from forecaster.onnx_export import runtime_tags
from forecaster.selection import evaluate_selection
from forecaster.training import train_model
from pipelines.config import RunConfig
from pipelines.console import notice, quiet_lightning
from pipelines.interrupts import naming_run
from pipelines.logger import EpochMLFlowLogger
from pipelines.logging_run import (
    log_baseline_runs,
    log_config_and_data,
    log_evaluation,
    log_pyfunc_model,
    per_series_json,
)
from pipelines.progress import EpochProgress
from pipelines.registry import Promotion, promote, register, version_of_run
from pipelines.resume import (
    check_resumable,
    checkpoint_directory,
    hold_run,
    logged_steps,
    process_tags,
    publisher,
    resuming_line,
)
from pipelines.shared_view import refresh_after_training
from pipelines.stale import find_stale_runs, warning_line
from pipelines.tracking import connect, ensure_experiment, environment_tags, is_rank_zero


@dataclass
class TrainingOutcome:
    run_id: str
    run_name: str
    model_uri: str
    family: str
    metrics: dict[str, dict[str, float]]  # forecaster name -> metric -> value (test split)
    selection_metrics: dict[str, dict[str, float]]  # the same on the selection score's folds (mean)
    test_windows: int
    seconds: float
    epochs: int
    registered_name: str | None = None
    registered_version: str | None = None
    promotion: Promotion | None = None
    test_forecasts: np.ndarray | None = field(default=None, repr=False)  # (N, H) as computed here
    intervals: dict[str, dict[str, float]] = field(default_factory=dict)  # "80" -> coverage, width
    per_series: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # a panel's, test
    selection_by_fold: list[dict[str, dict[str, float]]] = field(default_factory=list)  # fold 1 first
    # attention models: the alignment of test windows' weights (forecaster/alignment.py), reported only
    alignment: dict[str, float] | None = None
    train_seconds: float = 0.0  # the fit alone (``seconds``: the whole run, evaluation and logging too)

    def as_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "model_uri": self.model_uri,
            "registered_name": self.registered_name,
            "registered_version": self.registered_version,
            "promoted": None if self.promotion is None else self.promotion.promoted,
            "family": self.family,
            "test_windows": self.test_windows,
            "seconds": round(self.seconds, 2),
            "metrics": self.metrics,
            "selection_metrics": self.selection_metrics,
            "intervals": self.intervals,
            **({"alignment": self.alignment} if self.alignment else {}),
            **({"per_series": self.per_series} if self.per_series else {}),
        }


def dataset_name(config: RunConfig) -> str:
    return config.data.dataset or Path(config.data.path).stem


def default_run_name(config: RunConfig) -> str:
    window = config.window
    return f"{config.model.family}-{dataset_name(config)}-L{window.lookback}-H{window.horizon}"


def run_training(
    config: RunConfig, tracking_uri: str, quiet: bool = False, resume: str | None = None
) -> TrainingOutcome | None:
    """Returns None in DDP worker processes, which train but leave tracking to rank zero.
    Unless ``quiet``, rank zero shows training progress (pipelines/progress.py). ``resume``
    (a run id; ``config`` is then that run's) continues that run from its last checkpoint."""
    quiet_lightning()
    forecast_config = config.forecast_config()
    # Data problems surface before any run exists, so a bad file leaves nothing behind.
    prepared = prepare(load_from_config(forecast_config.data), forecast_config)
    if not is_rank_zero():
        with checkpoint_directory(resume, tracking_uri) as (directory, found):
            train_model(forecast_config, prepared, checkpoint_dir=directory, resume=found, progress=not quiet)
        return None
    connect(tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    experiment_id = ensure_experiment(config.tracking.experiment, tracking_uri)
    name = dataset_name(config)
    run_name = config.tracking.run_name or default_run_name(config)
    held = ExitStack()  # this process's lock on the run it trains, to the end (pipelines/locks.py)
    if resume:
        hold_run(held, client, resume, tracking_uri, resume=True)  # before its state is read
        try:
            resumed = check_resumable(client, resume)
            logged = logged_steps(client, resumed)
        except BaseException:
            held.close()  # a run that cannot be resumed is not kept locked
            raise
        start = {"run_id": resume}
        notice(resuming_line(resumed, config.train.epochs))
    else:
        warn_about_stale_runs(client, experiment_id)
        logged = {}
        tags = {
            "model.family": config.model.family,
            "dataset": name,
            "target": prepared.series.target,
            "role": "model",
            **environment_tags(),
            **process_tags(),  # from its first moment: a --resume of it is refused as live
        }
        start = {"experiment_id": experiment_id, "run_name": run_name, "tags": tags}
    started = time.perf_counter()
    with (
        held,
        mlflow.start_run(**start) as run,
        checkpoint_directory(resume, tracking_uri) as (directory, found),
        naming_run(run.info.run_id, run_name),  # a Ctrl-C from here on names the run to resume
    ):
        run_id = run.info.run_id
        if not resume:
            hold_run(held, client, run_id, tracking_uri, resume=False)
        mlflow.set_tags(process_tags())
        if not resume:
            log_config_and_data(config, prepared, name)
        logger = EpochMLFlowLogger(
            experiment_name=config.tracking.experiment,
            tracking_uri=tracking_uri,
            run_id=run_id,
            logged=logged,
        )
        callbacks: list[Callback] = [LearningRateMonitor("epoch")]
        if not quiet:
            callbacks.append(EpochProgress())
        trained = train_model(
            forecast_config,
            prepared,
            logger=logger,
            callbacks=callbacks,
            checkpoint_dir=directory,
            publish=publisher(run_id, tracking_uri),
            resume=found,
            progress=not quiet,
        )
        mlflow.log_metrics({"epochs_run": trained.epochs_run, "train_seconds": trained.seconds})
        test, val = (evaluate(trained.predictor, prepared, split) for split in ("test", "val"))  # reported
        # what models are chosen by: the mean over split.selection_folds folds (forecaster/selection.py)
        selection = evaluate_selection(trained.predictor, prepared, forecast_config.split.folds)
        info = log_pyfunc_model(trained.predictor, prepared, config.tracking.onnx_export)
        log_evaluation(test, val, selection, run_name, model_id=info.model_id, plots=config.tracking.plots)
        log_baseline_runs(test, val, selection, {"dataset": name, "target": prepared.series.target})
        outcome = TrainingOutcome(
            run_id=run.info.run_id,
            run_name=run_name,
            model_uri=info.model_uri,
            family=config.model.family,
            metrics=test.metrics,
            selection_metrics=selection.metrics,
            selection_by_fold=[fold.metrics for fold in selection.folds] or [selection.metrics],
            test_windows=test.windows,
            seconds=0.0,
            epochs=trained.epochs_run,
            train_seconds=trained.seconds,
            alignment=None if test.alignment is None else test.alignment.as_dict(),
            test_forecasts=test.forecasts[MODEL],
            per_series=per_series_json(test),
            intervals={
                str(round(100 * level)): {"coverage": r["coverage"], "width": r["width"]}
                for level, r in test.intervals.items()
            },
        )
        if config.tracking.registered_model:
            # a resumed run may have registered before it was killed: at most one version per run
            existing = version_of_run(config.tracking.registered_model, run_id) if resume else None
            version = existing or register(
                info.model_uri,
                config.tracking.registered_model,
                tags={
                    "dataset": name,
                    "target": prepared.series.target,
                    "lookback": str(config.window.lookback),
                    "horizon": str(config.window.horizon),
                    "family": config.model.family,
                    "test_mae": f"{test.metrics[MODEL]['mae']:.6g}",
                    "selection_mae": f"{selection.metrics[MODEL]['mae']:.6g}",
                    **runtime_tags(info.metadata),
                },
                description=(
                    f"{config.model.family} forecasting {prepared.series.target} of {name}, "
                    f"{config.window.horizon} steps from {config.window.lookback}; "
                    f"selection MAE {selection.metrics[MODEL]['mae']:.4g} vs naive "
                    f"{selection.metrics['naive']['mae']:.4g}, test MAE {test.metrics[MODEL]['mae']:.4g} vs "
                    f"naive {test.metrics['naive']['mae']:.4g} "
                    f"(run {run.info.run_id})"
                ),
            )
            outcome.registered_name = config.tracking.registered_model
            outcome.registered_version = str(version.version)
            # promote tags this run (and the one losing the alias) "registered" and "promoted"
            outcome.promotion = promote(
                config.tracking.registered_model,
                str(version.version),
                config.tracking.alias,
                allow_worse_than_naive=config.tracking.allow_worse_than_naive,
            )
            mlflow.set_tag("registered_version", str(version.version))
    refresh_after_training(client, experiment_id)  # the UI's comparison, this run included
    outcome.seconds = time.perf_counter() - started
    return outcome


def warn_about_stale_runs(client: mlflow.MlflowClient, experiment_id: str) -> None:
    """One line on stderr when the experiment holds runs a dead process left RUNNING."""
    from pipelines.console import errors

    stale = find_stale_runs(client, [experiment_id])
    if stale:
        errors.print(warning_line(stale), markup=False, soft_wrap=True)  # one line, however long
