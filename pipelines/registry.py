"""Registering models, and moving an alias only when the candidate is better on data no fit saw.

The gate compares candidate and holder on the candidate's selection window (the later part of its
validation period: early stopping never saw it, see forecaster/data/splitting.py; with
split.selection_folds > 1 the mean over its folds, forecaster/selection.py) and refuses when the
holder was itself fitted or early-stopped on any row of the selection period, or fitted on any row
of the earlier folds. The test split decides nothing.
Two trainers promoting at once take turns (pipelines/locks.py, the tracking backend's own
lock), so the second one compares against whatever the first one left, and the worse one cannot win."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import Prepared, prepare
from forecaster.data.source import load_from_config
from forecaster.data.splitting import selection_splits
from forecaster.errors import ForecasterError
from forecaster.onnx_export import runtime_tags
from forecaster.predictor import Predictor
from forecaster.pyfunc import load_predictor
from forecaster.selection import evaluate_selection
from pipelines.locks import promotion_lock
from pipelines.run_tags import retag_versions

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
    naive_mae: float | None = None  # the naive forecast's, on the same selection windows


def prepared_for(
    data_from: ForecastConfig, predictor: Predictor, table: pd.DataFrame | None = None
) -> Prepared:
    """``data_from``'s data and split, cut into ``predictor``'s windows (its look-back, its
    calendar features). Every stride-1 window of a split ends its forecast inside that split's
    rows whatever the look-back, so models with different look-backs are scored on the same
    targets. ``table``: the rows, for a model fit on a DataFrame (the Python API's), which its
    config cannot read again."""
    config = predictor.config.model_copy(
        update={
            "data": data_from.data.model_copy(
                update={"calendar_features": predictor.config.data.calendar_features}
            ),
            "split": data_from.split,
        }
    )
    return prepare(load_from_config(config.data, table=table), config)


def selection_mae(
    data_from: ForecastConfig, predictor: Predictor, table: pd.DataFrame | None = None
) -> float:
    """The selection score of ``predictor`` on ``data_from``'s data and selection folds (never test)."""
    prepared = prepared_for(data_from, predictor, table)
    return evaluate_selection(predictor, prepared, data_from.split.folds).metrics["model"]["mae"]


def split_start(prepared: Prepared, split: str) -> pd.Timestamp:
    """The first timestamp of ``split`` (the earliest over a panel's series)."""
    return min(part.series.frame.index[part.borders.rows(split)[0]] for part in prepared.parts)


def window_words(prepared: Prepared, folds: int = 1) -> str:
    """The selection window in words: its first and last target timestamps, its folds, windows."""
    splits = selection_splits(folds)
    end = max(part.series.frame.index[part.borders.rows("selection")[1] - 1] for part in prepared.parts)
    windows = sum(len(part.windows(split)) for part in prepared.parts for split in splits)
    in_folds = f"{folds} folds, " if folds > 1 else ""
    return f"selection window {split_start(prepared, splits[-1])} to {end} ({in_folds}{windows} windows)"


def last_seen(predictor: Predictor) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The last timestamps ``predictor``'s own training saw, and its training or early stopping."""
    prepared = prepare(load_from_config(predictor.config.data), predictor.config)

    def last(row: str) -> pd.Timestamp:
        return max(part.series.frame.index[getattr(part.borders, row) - 1] for part in prepared.parts)

    return last("train_end"), last("fitted_end")


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


def promote(
    name: str,
    version: str,
    alias: str = "champion",
    force: bool = False,
    allow_worse_than_naive: bool = False,
    table: pd.DataFrame | None = None,
) -> Promotion:
    """Point ``alias`` at ``version`` if its MAE on its selection window is below the naive
    forecast's there, and it has no holder or a higher-MAE holder (not fitted on that window
    either); ``force`` moves it whatever the figures, ``allow_worse_than_naive`` only waives the
    naive bar. Serialised per registered model, so concurrent promotions cannot race; the runs
    whose standing changed are re-tagged under the same lock (pipelines/run_tags.py). ``table``:
    the candidate's data, when it was fit on a DataFrame (``Forecaster.log``)."""
    with promotion_lock(name):
        holder = current_holder(name, alias)
        decision = _promote(name, str(version), alias, holder, force, allow_worse_than_naive, table)
        retag_versions(name, [str(version), *([holder] if decision.promoted and holder else [])])
        return decision


def _promote(
    name: str,
    version: str,
    alias: str,
    holder: str | None,
    force: bool,
    allow_worse_than_naive: bool,
    table: pd.DataFrame | None = None,
) -> Promotion:
    if holder == version:
        return Promotion(False, f"version {version} already holds @{alias}", holder_version=holder)
    candidate = load_predictor(f"models:/{name}/{version}")
    prepared = prepared_for(candidate.config, candidate, table)
    folds = candidate.config.split.folds
    window = window_words(prepared, folds)
    problem = None
    if holder is not None:
        incumbent = load_predictor(f"models:/{name}/{holder}")
        problem = comparable(candidate, incumbent)
        if problem is None:
            trained, fitted = last_seen(incumbent)
            if fitted >= split_start(prepared, "selection"):
                problem = f"v{holder} was fitted or early-stopped on data up to {fitted}, inside the {window}"
            elif trained >= split_start(prepared, selection_splits(folds)[-1]):
                problem = f"v{holder} was fitted on data up to {trained}, inside the {window}"
        if problem and not force:
            return Promotion(
                False, f"not comparable with v{holder}: {problem}", holder_version=holder, window=window
            )
    scores = evaluate_selection(candidate, prepared, folds).metrics  # the model and naive, same windows
    candidate_mae, naive_mae = scores["model"]["mae"], scores["naive"]["mae"]
    holder_mae = None if holder is None or problem else selection_mae(candidate.config, incumbent, table)
    figures = f"{candidate_mae:.4f}" + ("" if holder_mae is None else f" vs v{holder}'s {holder_mae:.4f}")
    figures += f" (naive {naive_mae:.4f})"
    found = Promotion(False, "", candidate_mae, holder, holder_mae, window, naive_mae)
    if not math.isfinite(candidate_mae):  # no flag gives it: the service would refuse to load it
        found.reason = (
            f"MAE {candidate_mae} on the {window}: the model's forecasts are not finite (a diverged "
            f"network); no @{alias}, whatever the flags, since the service refuses to serve such a model"
        )
        return found
    better = holder is None or (holder_mae is not None and candidate_mae < holder_mae)
    if not (better or force):
        found.reason = f"MAE {figures} on the {window}: not lower (the test split decides nothing)"
        return found
    below_naive = candidate_mae < naive_mae  # False for a NaN MAE (a diverged network), as wanted
    if not below_naive and not (allow_worse_than_naive or force):
        found.reason = naive_refusal(candidate_mae, naive_mae, window, alias)
        return found
    mlflow.MlflowClient().set_registered_model_alias(name, alias, version)
    found.promoted = True
    if holder is None:
        found.reason = f"@{alias} had no holder; MAE on the {window}: {figures}"
    else:
        found.reason = f"{'forced' if force and not better else 'lower MAE'} on the {window}: {figures}"
    if not below_naive:
        found.reason += "; not below naive, allowed"
    return found


def naive_refusal(candidate_mae: float, naive_mae: float, window: str, alias: str) -> str:
    """Why a model that does not beat repeating the last value gets no alias, and how to give it
    one anyway: serving it would be worse than serving nothing clever at all."""
    return (
        f"MAE {candidate_mae:.4f} on the {window} is not below the naive forecast's {naive_mae:.4f}: "
        f"no @{alias} for a model worse than repeating the last value "
        "(--allow-worse-than-naive gives it anyway)"
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
