"""`forecast evaluate`: score an existing model on a dataset's test split, logged as its own run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException

from forecaster.config import ForecastConfig
from forecaster.evaluation import Evaluation
from forecaster.model_data import SPLITS, data_config_for, evaluate_model
from forecaster.pyfunc import load_predictor
from pipelines.logging_run import log_evaluation, retrieval_ratios
from pipelines.registry import RegistryError
from pipelines.tracking import ensure_experiment


@dataclass
class ResolvedModel:
    """What a ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` URI points at right now."""

    uri: str  # as given
    name: str
    version: str
    run_id: str | None

    @property
    def pinned_uri(self) -> str:
        """The version itself, so an alias moving mid-evaluation cannot change what is scored."""
        return f"models:/{self.name}/{self.version}"

    def describe(self) -> str:
        run = f" (run {self.run_id[:8]})" if self.run_id else ""
        return f"{self.uri} -> version {self.version}{run}"


def resolve_model_uri(model_uri: str) -> ResolvedModel | None:
    """The registered version behind an alias or version URI; None for other URIs (runs:/...)."""
    if not model_uri.startswith("models:/"):
        return None
    rest = model_uri.removeprefix("models:/")
    client = mlflow.MlflowClient()
    try:
        if "@" in rest:
            name, alias = rest.split("@", 1)
            version = client.get_model_version_by_alias(name, alias)
        elif rest.count("/") == 1 and rest.rsplit("/", 1)[1].isdigit():
            name, number = rest.rsplit("/", 1)
            version = client.get_model_version(name, number)
        else:
            return None  # models:/m-... (a logged model, not a registered version)
    except MlflowException as exc:
        raise RegistryError(f"cannot resolve {model_uri}: {exc.message}") from None
    return ResolvedModel(model_uri, version.name, str(version.version), version.run_id)


def evaluations(
    model_uri: str, overrides: dict[str, Any], splits: tuple[str, ...] = SPLITS
) -> tuple[ForecastConfig, list[Evaluation]]:
    """What `forecast evaluate` scores: the model on its own data (or ``overrides``' file), split
    as in training, every window of each split (forecaster/model_data.py, as ``Forecaster.evaluate``)."""
    predictor = load_predictor(model_uri)
    return evaluate_model(predictor, data_config_for(predictor, overrides), splits=splits, retrieval=True)


def run_evaluation(
    model_uri: str, overrides: dict[str, Any], experiment: str, tracking_uri: str
) -> dict[str, Any]:
    resolved = resolve_model_uri(model_uri)
    config, (test, val, selection) = evaluations(resolved.pinned_uri if resolved else model_uri, overrides)
    name = config.data.dataset or Path(config.data.path).stem
    experiment_id = ensure_experiment(experiment, tracking_uri)
    tags = {
        "role": "evaluation",
        "model_uri": model_uri,
        "dataset": name,
        "model.family": config.model.family,
        **({"model_version": resolved.version} if resolved else {}),
    }
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"evaluate {model_uri}", tags=tags) as run:
        log_evaluation(test, val, selection, f"{model_uri} on {name}")
    ratios = retrieval_ratios(test, selection)  # a residual attention model's, as train --json has them
    return {
        "run_id": run.info.run_id,
        "dataset": name,
        "windows": test.windows,
        "metrics": test.metrics,
        **({"attention_retrieved_mse_ratio": ratios} if ratios else {}),
        "model_version": resolved.version if resolved else None,
        "model_run_id": resolved.run_id if resolved else None,
        "resolved": resolved.describe() if resolved else None,
    }
