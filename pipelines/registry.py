"""Registering models and moving aliases only when the candidate is better on the same test data."""

from __future__ import annotations

from dataclasses import dataclass

import mlflow
from mlflow.exceptions import MlflowException

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.errors import ForecasterError
from forecaster.evaluation import evaluate
from forecaster.predictor import Predictor


class RegistryError(ForecasterError):
    """A registry operation cannot be done as asked."""


@dataclass
class Promotion:
    promoted: bool
    reason: str
    candidate_mae: float | None = None
    holder_version: str | None = None
    holder_mae: float | None = None


def load_predictor(model_uri: str) -> Predictor:
    try:
        model = mlflow.pyfunc.load_model(model_uri)
    except (MlflowException, OSError) as exc:
        raise RegistryError(f"cannot load model {model_uri}: {exc}") from None
    return model.unwrap_python_model().predictor


def mae_on_test_split(data_from: ForecastConfig, predictor: Predictor) -> float:
    """MAE of ``predictor`` on the test split of ``data_from``'s data. Every stride-1 test window
    ends its forecast inside the test rows whatever the look-back, so models with different
    look-backs are scored on the same targets."""
    config = predictor.config.model_copy(
        update={
            "data": data_from.data.model_copy(
                update={"calendar_features": predictor.config.data.calendar_features}
            ),
            "split": data_from.split,
        }
    )
    prepared = prepare_series(load_from_config(config.data), config)
    return evaluate(predictor, prepared, "test").metrics["model"]["mae"]


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
    """Point ``alias`` at ``version`` if it has no holder, if ``version`` has a lower test MAE
    than the holder on the candidate's test data, or if forced."""
    client = mlflow.MlflowClient()
    holder = current_holder(name, alias)
    if holder == str(version):
        return Promotion(False, f"version {version} already holds @{alias}", holder_version=holder)
    if holder is None:
        client.set_registered_model_alias(name, alias, str(version))
        return Promotion(True, f"@{alias} had no holder")
    candidate = load_predictor(f"models:/{name}/{version}")
    incumbent = load_predictor(f"models:/{name}/{holder}")
    problem = comparable(candidate, incumbent)
    if problem and not force:
        return Promotion(False, f"not comparable with v{holder}: {problem}", holder_version=holder)
    candidate_mae = mae_on_test_split(candidate.config, candidate)
    holder_mae = None if problem else mae_on_test_split(candidate.config, incumbent)
    better = holder_mae is not None and candidate_mae < holder_mae
    if better or force:
        client.set_registered_model_alias(name, alias, str(version))
        why = "forced" if force and not better else "lower test MAE on the same test data"
        return Promotion(True, why, candidate_mae, holder, holder_mae)
    return Promotion(
        False,
        f"test MAE {candidate_mae:.4f} is not below v{holder}'s {holder_mae:.4f} on the same test data",
        candidate_mae,
        holder,
        holder_mae,
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
    version = mlflow.register_model(model_uri, name, tags=tags)
    client.update_model_version(name, version.version, description=description)
    return version


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
    tags = {
        "dataset": params.get("dataset.name", ""),
        "target": params.get("data.target") or run.data.tags.get("target", ""),
        "lookback": params.get("window.lookback", ""),
        "horizon": params.get("window.horizon", ""),
        "family": run.data.tags.get("model.family", ""),
        "test_mae": f"{metrics['test_mae']:.6g}",
    }
    description = f"{tags['family']} on {tags['dataset']}: test MAE {tags['test_mae']} (run {run_id})"
    return str(register(f"runs:/{run_id}/model", name, tags, description).version)
