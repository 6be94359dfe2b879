"""`forecast train`, as named stages: read the data (before any run exists, so a bad file leaves
nothing behind) -> open the run (a new one, or the killed one to resume, locked to this process)
-> fit (the Python API's ``Forecaster.fit``, with MLflow's logger and the run's checkpoints)
-> record (evaluate beside the baselines, log the pyfunc, the metrics, the baselines' runs)
-> register (a version, and the alias through the promotion gate) -> refresh the UI's comparison.

``Forecaster.log`` (the Python API) records and registers a model fitted in a notebook through
the same stages (``log_fitted``): pipelines/ is the only writer to MLflow tracking."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlflow
import pandas as pd
from pytorch_lightning.callbacks import Callback, LearningRateMonitor

from forecaster.data.datamodule import Prepared
from forecaster.evaluation import MODEL, Evaluation, evaluate
from forecaster.onnx_export import runtime_tags
from forecaster.predictor import Predictor
from forecaster.selection import evaluate_selection
from forecaster.training import TrainedModel, TrainingHooks
from pipelines.config import RunConfig, TrackingConfig
from pipelines.console import notice, quiet_lightning
from pipelines.interrupts import naming_run
from pipelines.logger import EpochMLFlowLogger
from pipelines.logging_run import (
    log_baseline_runs,
    log_config_and_data,
    log_evaluation,
    log_pyfunc_model,
    per_series_json,
    retrieval_ratios,
)
from pipelines.outcome import TrainingOutcome
from pipelines.progress import EpochProgress
from pipelines.registry import promote, register, version_of_run
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
from pipelines.tracking import (
    connect,
    ensure_experiment,
    environment_tags,
    is_rank_zero,
    resolve_tracking_uri,
)

if TYPE_CHECKING:
    from forecaster.api import Forecaster

__all__ = ["TrainingOutcome", "log_fitted", "run_training"]


def dataset_name(config: RunConfig) -> str:
    return config.data.dataset or Path(config.data.path or "data").stem


def default_run_name(config: RunConfig) -> str:
    window = config.window
    return f"{config.model.family}-{dataset_name(config)}-L{window.lookback}-H{window.horizon}"


@dataclass
class OpenRun:
    """Where a training is recorded: its experiment, what ``mlflow.start_run`` is given (a new
    run's name and tags, or the id of the run resumed) and, resuming, the metric steps it logged."""

    client: mlflow.MlflowClient
    experiment_id: str
    run_name: str
    start: dict[str, Any]
    logged: dict[str, set[int]]


def run_training(
    config: RunConfig, tracking_uri: str, quiet: bool = False, resume: str | None = None
) -> TrainingOutcome | None:
    """Returns None in DDP worker processes, which train but leave tracking to rank zero.
    Unless ``quiet``, rank zero shows training progress (pipelines/progress.py). ``resume``
    (a run id; ``config`` is then that run's) continues that run from its last checkpoint."""
    from forecaster.api import Forecaster

    quiet_lightning()
    forecaster = Forecaster(config=config.forecast_config())
    prepared = forecaster.prepare_data()  # data problems surface before any run exists
    if not is_rank_zero():
        with checkpoint_directory(resume, tracking_uri) as (directory, found):
            forecaster.fit(hooks=TrainingHooks(checkpoint_dir=directory, resume=found, progress=not quiet))
        return None
    connect(tracking_uri)
    held = ExitStack()  # this process's lock on the run it trains, to the end (pipelines/locks.py)
    opened = open_run(config, prepared, tracking_uri, held, resume)
    started = time.perf_counter()
    with (
        held,
        mlflow.start_run(**opened.start) as run,
        checkpoint_directory(resume, tracking_uri) as (directory, found),
        naming_run(run.info.run_id, opened.run_name),  # a Ctrl-C from here on names the run to resume
    ):
        if not resume:
            hold_run(held, opened.client, run.info.run_id, tracking_uri, resume=False)
            log_config_and_data(config, prepared, dataset_name(config))
        mlflow.set_tags(process_tags())
        hooks = training_hooks(config, opened, run.info.run_id, tracking_uri, quiet, directory, found)
        trained = fit_stage(forecaster, hooks)
        outcome = record_stage(trained, prepared, config, opened.run_name)
        register_stage(outcome, config, prepared, resumed=resume is not None)
    refresh_after_training(opened.client, opened.experiment_id)  # the UI's comparison, this run included
    outcome.seconds = time.perf_counter() - started
    return outcome


def open_run(
    config: RunConfig, prepared: Prepared, tracking_uri: str, held: ExitStack, resume: str | None
) -> OpenRun:
    """The run to train in: a new one (its tags from its first moment, so that a --resume of it
    is refused as live), or ``resume``, locked in ``held`` before its state is read."""
    client = mlflow.MlflowClient(tracking_uri)
    experiment_id = ensure_experiment(config.tracking.experiment, tracking_uri)
    run_name = config.tracking.run_name or default_run_name(config)
    if not resume:
        warn_about_stale_runs(client, experiment_id)
        tags = {**run_tags(config, prepared), **process_tags()}
        start = {"experiment_id": experiment_id, "run_name": run_name, "tags": tags}
        return OpenRun(client, experiment_id, run_name, start, {})
    hold_run(held, client, resume, tracking_uri, resume=True)
    try:
        resumed = check_resumable(client, resume)
        logged = logged_steps(client, resumed)
    except BaseException:
        held.close()  # a run that cannot be resumed is not kept locked
        raise
    notice(resuming_line(resumed, config.train.epochs))
    return OpenRun(client, experiment_id, run_name, {"run_id": resume}, logged)


def run_tags(config: RunConfig, prepared: Prepared) -> dict[str, str]:
    return {
        "model.family": config.model.family,
        "dataset": dataset_name(config),
        "target": prepared.series.target,
        "role": "model",
        **environment_tags(),
    }


def training_hooks(
    config: RunConfig,
    opened: OpenRun,
    run_id: str,
    tracking_uri: str,
    quiet: bool,
    directory: Path,
    found: bool,
) -> TrainingHooks:
    """What the run adds to the fit: epoch metrics in MLflow, the learning rate, the epoch lines
    (unless ``quiet``), checkpoints published to the run (and resumed from, when ``found``)."""
    logger = EpochMLFlowLogger(
        experiment_name=config.tracking.experiment,
        tracking_uri=tracking_uri,
        run_id=run_id,
        logged=opened.logged,
    )
    callbacks: list[Callback] = [LearningRateMonitor("epoch")]
    if not quiet:
        callbacks.append(EpochProgress())
    return TrainingHooks(logger, callbacks, directory, publisher(run_id, tracking_uri), found, not quiet)


def fit_stage(forecaster: Forecaster, hooks: TrainingHooks) -> TrainedModel:
    forecaster.fit(hooks=hooks)
    assert forecaster.trained is not None
    mlflow.log_metrics(
        {"epochs_run": forecaster.trained.epochs_run, "train_seconds": forecaster.trained.seconds}
    )
    return forecaster.trained


@dataclass
class Scores:
    test: Evaluation  # reported
    val: Evaluation
    selection: Evaluation  # what models are chosen by: the mean over split.selection_folds folds


def score(predictor: Predictor, prepared: Prepared) -> Scores:
    """The run's scores; the test and selection ones with an attention model's retrieved term
    against none, which the run logs (``evaluate(retrieval=True)``)."""
    test = evaluate(predictor, prepared, "test", retrieval=True)
    val = evaluate(predictor, prepared, "val")
    folds = predictor.config.split.folds
    return Scores(test, val, evaluate_selection(predictor, prepared, folds, retrieval=True))


def record_stage(
    trained: TrainedModel, prepared: Prepared, config: RunConfig, run_name: str
) -> TrainingOutcome:
    """In the active run: the model scored beside the baselines, the pyfunc model logged (its
    ONNX export when tracking.onnx_export), the figures, plots and the baselines' nested runs."""
    predictor = trained.predictor
    scores = score(predictor, prepared)
    test, val, selection = scores.test, scores.val, scores.selection
    info = log_pyfunc_model(predictor, prepared, config.tracking.onnx_export)
    log_evaluation(test, val, selection, run_name, model_id=info.model_id, plots=config.tracking.plots)
    log_baseline_runs(
        test, val, selection, {"dataset": dataset_name(config), "target": prepared.series.target}
    )
    run = mlflow.active_run()
    assert run is not None
    return TrainingOutcome(
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
        retrieval=retrieval_ratios(test, selection) or None,
        test_forecasts=test.forecasts[MODEL],
        per_series=per_series_json(test),
        intervals={
            str(round(100 * level)): {"coverage": r["coverage"], "width": r["width"]}
            for level, r in test.intervals.items()
        },
        model_metadata=info.metadata,
    )


def register_stage(
    outcome: TrainingOutcome,
    config: RunConfig,
    prepared: Prepared,
    resumed: bool,
    table: pd.DataFrame | None = None,
) -> None:
    """With tracking.registered_model: a version of the run's model (at most one per run: a resumed
    run may have registered before it was killed), and the alias only through the gate."""
    name = config.tracking.registered_model
    if not name:
        return
    existing = version_of_run(name, outcome.run_id) if resumed else None
    version = existing or register(
        outcome.model_uri,
        name,
        tags=version_tags(outcome, config, prepared),
        description=version_description(outcome, config, prepared),
    )
    outcome.registered_name, outcome.registered_version = name, str(version.version)
    # promote tags this run (and the one losing the alias) "registered" and "promoted"
    outcome.promotion = promote(
        name,
        str(version.version),
        config.tracking.alias,
        allow_worse_than_naive=config.tracking.allow_worse_than_naive,
        table=table,
    )
    mlflow.set_tag("registered_version", str(version.version))


def version_tags(outcome: TrainingOutcome, config: RunConfig, prepared: Prepared) -> dict[str, str]:
    return {
        "dataset": dataset_name(config),
        "target": prepared.series.target,
        "lookback": str(config.window.lookback),
        "horizon": str(config.window.horizon),
        "family": config.model.family,
        "test_mae": f"{outcome.metrics[MODEL]['mae']:.6g}",
        "selection_mae": f"{outcome.selection_metrics[MODEL]['mae']:.6g}",
        **runtime_tags(outcome.model_metadata),
    }


def version_description(outcome: TrainingOutcome, config: RunConfig, prepared: Prepared) -> str:
    test, selection = outcome.metrics, outcome.selection_metrics
    return (
        f"{config.model.family} forecasting {prepared.series.target} of {dataset_name(config)}, "
        f"{config.window.horizon} steps from {config.window.lookback}; "
        f"selection MAE {selection[MODEL]['mae']:.4g} vs naive {selection['naive']['mae']:.4g}, "
        f"test MAE {test[MODEL]['mae']:.4g} vs naive {test['naive']['mae']:.4g} (run {outcome.run_id})"
    )


def log_fitted(forecaster: Forecaster, tracking: dict[str, Any], tracking_uri: str | None) -> TrainingOutcome:
    """``Forecaster.log``: a model fitted in Python recorded as `forecast train` records one (a run
    with its config, data provenance, training figures, the record and register stages)."""
    assert (
        forecaster.config is not None and forecaster.prepared is not None and forecaster.trained is not None
    )
    config = RunConfig.model_validate(
        {**forecaster.config.model_dump(), "tracking": TrackingConfig.model_validate(tracking)}
    )
    uri = connect(resolve_tracking_uri(tracking_uri))
    client = mlflow.MlflowClient(uri)
    experiment_id = ensure_experiment(config.tracking.experiment, uri)
    run_name = config.tracking.run_name or default_run_name(config)
    trained, prepared = forecaster.trained, forecaster.prepared
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=run_tags(config, prepared)):
        log_config_and_data(config, prepared, dataset_name(config))
        mlflow.log_metrics({"epochs_run": trained.epochs_run, "train_seconds": trained.seconds})
        outcome = record_stage(trained, prepared, config, run_name)
        register_stage(outcome, config, prepared, resumed=False, table=forecaster.table)
    refresh_after_training(client, experiment_id)
    outcome.seconds = trained.seconds
    return outcome


def warn_about_stale_runs(client: mlflow.MlflowClient, experiment_id: str) -> None:
    """One line on stderr when the experiment holds runs a dead process left RUNNING."""
    from pipelines.console import errors

    stale = find_stale_runs(client, [experiment_id])
    if stale:
        errors.print(warning_line(stale), markup=False, soft_wrap=True)  # one line, however long
