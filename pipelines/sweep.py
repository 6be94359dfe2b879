"""`forecast sweep`: Optuna search over model family, cell, direction, size, depth, dropout,
look-back, learning rate and teacher forcing. Each trial is a nested MLflow run scored by the
selection score (forecaster/selection.py: the selection period, or the mean over
split.selection_folds folds; never test), as the promotion gate and `compare` score; bad trials are
pruned from their validation curve (the early-stopping rows, epoch by epoch); the best trial is
re-trained as a normal run (test metrics, model) and registered if asked.

With an RDB storage URL (sqlite:///optuna.db, postgresql://...) several workers, on as many
machines, share one study: each runs its ``--trials``, the trials add up, a configuration already
scored is not trained again, and the best trial is re-trained and registered once, by the worker
that claims it (pipelines/sweep_claims.py) after every running trial of the study has ended. A
worker that starts after the others ended and finds a better trial registers that one too."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import warnings
from dataclasses import dataclass
from typing import Any

import mlflow
import optuna
import pytorch_lightning as pl

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError
from forecaster.selection import evaluate_selection
from forecaster.training import train_model
from pipelines.config import RunConfig
from pipelines.console import console, quiet_lightning, table
from pipelines.locks import database_lock
from pipelines.logging_run import flatten
from pipelines.sweep_claims import claim_best
from pipelines.tracking import ensure_experiment, environment_tags
from pipelines.train import TrainingOutcome, default_run_name, run_training

HIDDEN_SIZES = (16, 32, 64, 128)


class OptunaPruning(pl.Callback):
    """Report val MAE each epoch; stop the trial when Optuna's pruner says it is hopeless."""

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking or "val_mae" not in trainer.callback_metrics:
            return
        epoch = trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics["val_mae"]), step=epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned at epoch {epoch}")


def lookback_choices(base: ForecastConfig) -> list[int]:
    lookback, segment = base.window.lookback, base.model.segment_length
    choices = sorted({max(2, lookback // 2), lookback, lookback * 2})
    return [c for c in choices if not segment or c % segment == 0] or [lookback]


def suggest(trial: optuna.Trial | optuna.trial.FixedTrial, base: RunConfig) -> RunConfig:
    """The base config with this trial's choices; the search space is documented here."""
    data = base.model_dump()
    model, train, window = data["model"], data["train"], data["window"]
    model["architecture"] = trial.suggest_categorical("architecture", ["many_to_one", "seq2seq"])
    model["cell"] = trial.suggest_categorical("cell", ["rnn", "lstm", "gru"])
    model["bidirectional"] = trial.suggest_categorical("bidirectional", [False, True])
    model["hidden_size"] = trial.suggest_categorical("hidden_size", list(HIDDEN_SIZES))
    model["layers"] = trial.suggest_int("layers", 1, 3)
    model["dropout"] = trial.suggest_float("dropout", 0.0, 0.3)
    window["lookback"] = trial.suggest_categorical("lookback", lookback_choices(base))
    train["learning_rate"] = trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)
    if model["architecture"] == "seq2seq":
        model["attention"] = trial.suggest_categorical("attention", ["none", "bahdanau"])
        model["teacher_forcing"] = trial.suggest_float("teacher_forcing", 0.0, 1.0)
        model["teacher_forcing_decay"] = trial.suggest_float("teacher_forcing_decay", 0.5, 1.0)
        model["segment_length"] = 0
        if model.get("decoder", "autoregressive") != "direct":
            model["highway"] = 0  # the step-by-step decoder has no linear skip (config refuses one)
    else:
        model["attention"] = "none"  # a seq2seq base's attention: a many-to-one network has none
    train["progress_bar"] = False
    return RunConfig.model_validate(data)


@dataclass
class SweepResult:
    study_name: str
    best_value: float
    best_params: dict[str, Any]
    trials: list[dict[str, Any]]
    best_run: TrainingOutcome | None

    def as_json(self) -> dict[str, Any]:
        return {
            "study": self.study_name,
            "best_selection_mae": self.best_value,
            "best_params": self.best_params,
            "trials": self.trials,
            "best_run": None if self.best_run is None else self.best_run.as_json(),
        }


def trial_line(
    study: optuna.Study, trial: optuna.trial.FrozenTrial, finished: int, trials: int, seconds: float
) -> str:
    """One line per finished trial, e.g. ``trial 3 [4/20]  selection MAE 0.4123 (gru, L=14)  best 0.3981
    (trial 1)  4.2 s``; pruned trials say why."""
    if trial.state == optuna.trial.TrialState.COMPLETE:
        attrs = trial.user_attrs
        what = f"selection MAE {trial.value:.4f} ({attrs.get('family', '?')}, L={attrs.get('lookback', '?')})"
    else:
        what = trial.state.name.lower()
        if trial.state == optuna.trial.TrialState.PRUNED and trial.user_attrs.get("pruned"):
            what += f" ({trial.user_attrs['pruned']})"
    try:
        best = f"best {study.best_value:.4f} (trial {study.best_trial.number})"
    except ValueError:  # no completed trial yet
        best = "best -"
    return f"trial {trial.number} [{finished}/{trials}]  {what}  {best}  {seconds:.1f} s"


def run_sweep(
    base: RunConfig,
    trials: int,
    tracking_uri: str,
    storage: str | None = None,
    study_name: str | None = None,
    retrain_best: bool = True,
    quiet: bool = False,
) -> SweepResult:
    """Unless ``quiet``, prints one line per finished trial (with the best so far) and the
    re-trained best model's epochs."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our own line per trial says it
    quiet_lightning()
    forecast_base = base.forecast_config()
    series = load_from_config(forecast_base.data)  # once: every trial sees the same data
    study_name = study_name or f"sweep-{default_run_name(base)}"
    study = optuna.create_study(
        study_name=study_name,
        storage=shared_storage(storage),
        load_if_exists=True,
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=worker_seed(base.train.seed, storage)),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1),
    )
    experiment_id = ensure_experiment(base.tracking.experiment, tracking_uri)
    tags = {"role": "sweep", "study": study_name, **environment_tags()}

    def objective(trial: optuna.Trial) -> float:
        config = suggest(trial, base)
        done = scored_before(trial)
        if done is not None:  # another worker (or this one) trained this very configuration
            for key, value in done.user_attrs.items():
                trial.set_user_attr(key, value)
            trial.set_user_attr("same_as", done.number)
            return float(done.value)
        trial_tags = {
            **tags,
            "role": "sweep-trial",
            "trial": str(trial.number),
            "model.family": config.model.family,
        }
        with mlflow.start_run(
            run_name=f"trial-{trial.number}", nested=True, experiment_id=experiment_id, tags=trial_tags
        ) as run:
            mlflow.log_params(flatten(config.model_dump(mode="json")))
            try:
                forecast_config = config.forecast_config()
                prepared = prepare(series, forecast_config)
                trained = train_model(
                    forecast_config, prepared, callbacks=[OptunaPruning(trial)], progress=not quiet
                )
            except (optuna.TrialPruned, ConfigError) as exc:
                mlflow.set_tag("pruned", str(exc))
                trial.set_user_attr("pruned", str(exc))
                mlflow.end_run(status="KILLED")
                raise optuna.TrialPruned(str(exc)) from None
            selection = evaluate_selection(trained.predictor, prepared, forecast_config.split.folds)
            value = selection.metrics["model"]["mae"]
            mlflow.log_metrics(
                {"selection_mae": value, "naive_selection_mae": selection.metrics["naive"]["mae"]}
            )
            trial.set_user_attr("run_id", run.info.run_id)
        trial.set_user_attr("family", config.model.family)
        trial.set_user_attr("lookback", config.window.lookback)
        return value

    started = time.perf_counter()
    finished = 0

    def report(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        nonlocal started, finished
        finished += 1
        seconds, started = time.perf_counter() - started, time.perf_counter()
        if not quiet:
            console.print(trial_line(study, trial, finished, trials, seconds), markup=False)

    with mlflow.start_run(experiment_id=experiment_id, run_name=study_name, tags=tags):
        mlflow.log_params({"sweep.trials": trials, "sweep.storage": storage or "in-memory"})
        study.optimize(objective, n_trials=trials, catch=(), callbacks=[report])
        completed = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if not completed:
            raise ConfigError(f"all {len(study.trials)} trials were pruned or failed; widen the settings")
        mlflow.log_metric("best_selection_mae", study.best_value)
        mlflow.log_dict(study.best_params, "best_params.json")
    summary = [
        {"number": t.number, "state": t.state.name, "selection_mae": t.value, **t.params}
        for t in study.trials
    ]
    table(
        f"study {study_name}: {len(completed)} complete of {len(study.trials)}",
        ["trial", "state", "selection MAE", "architecture", "cell", "hidden", "layers", "lookback"],
        [
            [
                t["number"],
                t["state"],
                t["selection_mae"],
                t.get("architecture"),
                t.get("cell"),
                t.get("hidden_size"),
                t.get("layers"),
                t.get("lookback"),
            ]
            for t in summary
        ],
    )
    best_run = None
    if retrain_best and storage is not None:
        # a shared study: wait for the other workers' running trials, then one worker re-trains
        wait_for_running_trials(study, quiet)
        study = optuna.load_study(study_name=study_name, storage=shared_storage(storage))
        retrain_best = claim_best(storage, study_name, study.best_trial.number)
        if not retrain_best and not quiet:
            console.print("another worker of this study re-trains and registers its best", markup=False)
    if retrain_best:
        best = suggest(optuna.trial.FixedTrial(study.best_params), base)
        best.train.progress_bar = base.train.progress_bar
        best.tracking.run_name = f"{study_name}-best"
        best_run = run_training(best, tracking_uri, quiet=quiet)
    return SweepResult(study_name, study.best_value, study.best_params, summary, best_run)


def shared_storage(storage: str | None) -> optuna.storages.BaseStorage | None:
    """An RDB storage whose workers send a heartbeat: a trial whose worker died (killed, a lost
    machine) is marked failed after two minutes instead of staying RUNNING for ever, which would
    keep the other workers waiting to re-train the best."""
    if storage is None:
        return None
    # workers started together would each create the study's tables (one fails on the other's
    # alembic_version row): the first creates them, the others wait and find them
    schema = database_lock(storage, "creation of the Optuna study's tables", "optuna-schema", 300)
    with warnings.catch_warnings(), schema:  # heartbeats are marked experimental since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(storage, heartbeat_interval=30, grace_period=120)


def worker_seed(seed: int, storage: str | None) -> int:
    """The sampler's seed: the config's for a study of its own (reproducible); for a shared one,
    varied per worker (host, process and start time: in a pod the pid is always 1), or every
    worker would propose the same configurations."""
    if storage is None:
        return seed
    worker = f"{seed} {socket.gethostname()} {os.getpid()} {time.time_ns()}"
    return int.from_bytes(hashlib.sha256(worker.encode()).digest()[:4], "big") % 2**31


def scored_before(trial: optuna.Trial) -> optuna.trial.FrozenTrial | None:
    """A complete trial of the study with this trial's very parameters."""
    for other in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if other.number != trial.number and other.params == trial.params:
            return other
    return None


def wait_for_running_trials(
    study: optuna.Study, quiet: bool, poll_s: float = 2.0, limit_s: float = 6 * 3600
) -> None:
    """Until no trial of the study is running or waiting, seen twice ``poll_s`` apart with the
    same number of trials: a worker between two of its trials (milliseconds from one to the next)
    is not taken for a worker that has finished. A dead worker's trial stops counting once its
    heartbeat is older than the storage's grace period (Optuna marks it failed only when asked)."""
    said = False
    deadline = time.monotonic() + limit_s
    states = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)
    settled_at: int | None = None  # the trial count when no trial was last seen running
    while time.monotonic() < deadline:
        with warnings.catch_warnings():  # experimental since Optuna 2.9, as heartbeats are
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        running = study.get_trials(deepcopy=False, states=states)
        count = len(study.get_trials(deepcopy=False))
        if not running and settled_at == count:
            return
        settled_at = None if running else count
        if running and not said and not quiet:
            console.print("waiting for the study's other running trials to end ...", markup=False)
            said = True
        time.sleep(poll_s)
    console.print(
        f"trials still running after {limit_s / 3600:.0f} h: re-training the best so far", markup=False
    )
