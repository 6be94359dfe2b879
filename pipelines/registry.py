"""Registering models, and moving an alias only when the candidate is better on data no fit saw.

The gate compares candidate and holder on the candidate's selection window (the later part of its
validation period: early stopping never saw it, see forecaster/data/splitting.py) and refuses when
the holder was itself fitted or early-stopped on any of those rows. The test split decides nothing.
Two trainers promoting at once take turns (pipelines/locks.py, the tracking backend's own
lock), so the second one compares against whatever the first one left, and the worse one cannot win."""

from __future__ import annotations

from dataclasses import dataclass

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import Prepared, prepare
from forecaster.data.source import load_from_config
from forecaster.errors import ForecasterError
from forecaster.evaluation import evaluate
from forecaster.onnx_export import runtime_tags
from forecaster.predictor import Predictor
from pipelines.locks import promotion_lock

SELECTION_METRIC = "selection_mae"


class RegistryError(ForecasterError):
    """A registry operation cannot be done as asked."""


@dataclass
class Promotion:
    promoted: bool
    reason: str
    candidate_mae: float | None = None  # on the selection window
    holder_version: str | None = None
    holder_mae: float | None = None
    window: str | None = None  # the selection window that decided, in words


def load_predictor(model_uri: str) -> Predictor:
    try:
        model = mlflow.pyfunc.load_model(model_uri)
    except (MlflowException, OSError) as exc:
        raise RegistryError(f"cannot load model {model_uri}: {exc}") from None
    return model.unwrap_python_model().predictor


def prepared_for(data_from: ForecastConfig, predictor: Predictor) -> Prepared:
    """``data_from``'s data and split, cut into ``predictor``'s windows (its look-back, its
    calendar features). Every stride-1 window of a split ends its forecast inside that split's
    rows whatever the look-back, so models with different look-backs are scored on the same
    targets."""
    config = predictor.config.model_copy(
        update={
            "data": data_from.data.model_copy(
                update={"calendar_features": predictor.config.data.calendar_features}
            ),
            "split": data_from.split,
        }
    )
    return prepare(load_from_config(config.data), config)


def selection_mae(data_from: ForecastConfig, predictor: Predictor) -> float:
    """MAE of ``predictor`` on the selection window of ``data_from``'s data (never test)."""
    return evaluate(predictor, prepared_for(data_from, predictor), "selection").metrics["model"]["mae"]


def split_start(prepared: Prepared, split: str) -> pd.Timestamp:
    """The first timestamp of ``split`` (the earliest over a panel's series)."""
    return min(part.series.frame.index[part.borders.rows(split)[0]] for part in prepared.parts)


def window_words(prepared: Prepared, split: str) -> str:
    end = max(part.series.frame.index[part.borders.rows(split)[1] - 1] for part in prepared.parts)
    windows = sum(len(part.windows(split)) for part in prepared.parts)
    return f"{split} window {split_start(prepared, split)} to {end} ({windows} windows)"


def last_fitted(predictor: Predictor) -> pd.Timestamp:
    """The last timestamp ``predictor``'s own training or early stopping saw."""
    prepared = prepare(load_from_config(predictor.config.data), predictor.config)
    return max(part.series.frame.index[part.borders.fitted_end - 1] for part in prepared.parts)


def comparable(candidate: Predictor, holder: Predictor) -> str | None:
    """Why the two cannot be compared on the same data, or None."""
    if candidate.horizon != holder.horizon:
        return f"horizons differ ({candidate.horizon} vs {holder.horizon})"
    if candidate.features != holder.features:
        return f"features differ ({candidate.features} vs {holder.features})"
    return None


def current_holder(name: str, alias: str) -> str | None:
    try:
        return str(mlflow.MlflowClient().get_model_version_by_alias(name, alias).version)
    except MlflowException:
        return None


def promote(name: str, version: str, alias: str = "champion", force: bool = False) -> Promotion:
    """Point ``alias`` at ``version`` if it has no holder, if ``version`` has a lower MAE than the
    holder on the candidate's selection window (which the holder was not fitted on either), or if
    forced. Serialised per registered model, so concurrent promotions cannot race."""
    with promotion_lock(name):
        return _promote(name, str(version), alias, force)


def _promote(name: str, version: str, alias: str, force: bool) -> Promotion:
    client = mlflow.MlflowClient()
    holder = current_holder(name, alias)
    if holder == version:
        return Promotion(False, f"version {version} already holds @{alias}", holder_version=holder)
    if holder is None:
        client.set_registered_model_alias(name, alias, version)
        return Promotion(True, f"@{alias} had no holder")
    candidate = load_predictor(f"models:/{name}/{version}")
    incumbent = load_predictor(f"models:/{name}/{holder}")
    prepared = prepared_for(candidate.config, candidate)
    window = window_words(prepared, "selection")
    problem = comparable(candidate, incumbent)
    if problem is None:
        selection_from = split_start(prepared, "selection")
        if (fitted := last_fitted(incumbent)) >= selection_from:
            problem = f"v{holder} was fitted or early-stopped on data up to {fitted}, inside the {window}"
    if problem and not force:
        return Promotion(
            False, f"not comparable with v{holder}: {problem}", holder_version=holder, window=window
        )
    candidate_mae = evaluate(candidate, prepared, "selection").metrics["model"]["mae"]
    holder_mae = None if problem else selection_mae(candidate.config, incumbent)
    better = holder_mae is not None and candidate_mae < holder_mae
    figures = f"{candidate_mae:.4f}" + ("" if holder_mae is None else f" vs v{holder}'s {holder_mae:.4f}")
    if better or force:
        client.set_registered_model_alias(name, alias, version)
        why = "forced" if force and not better else "lower MAE"
        return Promotion(True, f"{why} on the {window}: {figures}", candidate_mae, holder, holder_mae, window)
    return Promotion(
        False,
        f"MAE {figures} on the {window}: not lower (the test split decides nothing)",
        candidate_mae,
        holder,
        holder_mae,
        window,
    )


def register(
    model_uri: str, name: str, tags: dict[str, str], description: str
) -> mlflow.entities.model_registry.ModelVersion:
    client = mlflow.MlflowClient()
    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(
            name, description="Recurrent forecaster registered by `forecast train`."
        )
    # create_model_version, not mlflow.register_model: that one prints "Registered model 'X'
    # already exists. Creating a new version..." to stderr even for the name just created here
    source, run_id, model_id = _model_source(client, model_uri)
    return client.create_model_version(
        name, source, run_id=run_id, tags=tags, description=description, model_id=model_id
    )


def version_of_run(name: str, run_id: str) -> mlflow.entities.model_registry.ModelVersion | None:
    """The version of ``name`` a run already registered, if any: a run resumed after it was
    killed between registering and finishing must not register a second version."""
    try:
        found = mlflow.MlflowClient().search_model_versions(f"name = '{name}' and run_id = '{run_id}'")
    except MlflowException:  # no such registered model yet
        return None
    return min(found, key=lambda v: int(v.version)) if found else None


def _model_source(client: mlflow.MlflowClient, model_uri: str) -> tuple[str, str | None, str | None]:
    """(source, run id, logged-model id) for ``models:/m-...`` (what ``log_model`` returns) or
    ``runs:/RUN_ID/NAME``, resolved as ``mlflow.register_model`` does."""
    if model_uri.startswith("runs:/"):
        run_id, _, artifact_path = model_uri.removeprefix("runs:/").partition("/")
        run = client.get_run(run_id)
        logged = [
            m
            for m in client.search_logged_models(
                experiment_ids=[run.info.experiment_id], filter_string=f"name = '{artifact_path}'"
            )
            if m.source_run_id == run_id
        ]
        if not logged:
            raise RegistryError(f"run {run_id} has no logged model named {artifact_path!r}")
        steps = {o.model_id: o.step for o in (run.outputs.model_outputs if run.outputs else [])}
        model_id = max(logged, key=lambda m: steps.get(m.model_id, 0)).model_id
        return f"models:/{model_id}", run_id, model_id
    candidate = model_uri.removeprefix("models:/")
    if model_uri.startswith("models:/") and candidate.startswith("m-") and "/" not in candidate:
        return model_uri, client.get_logged_model(candidate).source_run_id, candidate
    return model_uri, None, None


def register_run(run_id: str, name: str) -> str:
    """Register the model logged by ``run_id`` (tags and description from the run itself)."""
    client = mlflow.MlflowClient()
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise RegistryError(f"run {run_id} not found on {mlflow.get_tracking_uri()}") from None
    if run.info.status != "FINISHED":
        raise RegistryError(f"run {run_id} is {run.info.status}; only finished runs can be registered")
    params, metrics = run.data.params, run.data.metrics
    if "test_mae" not in metrics:
        raise RegistryError(f"run {run_id} has no test_mae: is it a `forecast train` run?")
    selection = metrics.get(SELECTION_METRIC)
    tags = {
        "dataset": params.get("dataset.name", ""),
        "target": params.get("data.target") or run.data.tags.get("target", ""),
        "lookback": params.get("window.lookback", ""),
        "horizon": params.get("window.horizon", ""),
        "family": run.data.tags.get("model.family", ""),
        "test_mae": f"{metrics['test_mae']:.6g}",
        **({} if selection is None else {SELECTION_METRIC: f"{selection:.6g}"}),
        **runtime_tags(run.data.tags),
    }
    description = f"{tags['family']} on {tags['dataset']}: test MAE {tags['test_mae']} (run {run_id})"
    return str(register(f"runs:/{run_id}/model", name, tags, description).version)
