"""`forecast evaluate`: score an existing model on a dataset's test split, logged as its own run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from forecaster.config import DataConfig, ForecastConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError
from forecaster.evaluation import evaluate
from forecaster.predictor import Predictor
from pipelines.logging_run import log_evaluation
from pipelines.registry import load_predictor
from pipelines.tracking import ensure_experiment


def data_config_for(predictor: Predictor, overrides: dict[str, Any]) -> DataConfig:
    """The model's own data settings, or another dataset/file holding the same feature columns."""
    own = predictor.config.data
    if not overrides:
        return own
    base = own.model_dump()
    base.update(dataset=None, path=None, time_column=None, target=None)
    base["covariates"] = predictor.features[1:]
    if "path" in overrides:
        base["time_column"] = own.time_column
        base["target"] = own.target or predictor.features[0]
    base.update(overrides)
    if base["path"] is not None and (base["time_column"] is None or base["target"] is None):
        raise ConfigError(f"{base['path']}: give --time-column and --target for this file")
    return DataConfig.model_validate(base)


def config_with_data(predictor: Predictor, data: DataConfig) -> ForecastConfig:
    return predictor.config.model_copy(update={"data": data})


def run_evaluation(
    model_uri: str, overrides: dict[str, Any], experiment: str, tracking_uri: str
) -> dict[str, Any]:
    predictor = load_predictor(model_uri)
    config = config_with_data(predictor, data_config_for(predictor, overrides))
    prepared = prepare_series(load_from_config(config.data), config)
    test, val, selection = (evaluate(predictor, prepared, split) for split in ("test", "val", "selection"))
    name = config.data.dataset or Path(config.data.path).stem
    experiment_id = ensure_experiment(experiment, tracking_uri)
    tags = {
        "role": "evaluation",
        "model_uri": model_uri,
        "dataset": name,
        "model.family": config.model.family,
    }
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"evaluate {model_uri}", tags=tags) as run:
        log_evaluation(test, val, selection, f"{model_uri} on {name}")
    return {"run_id": run.info.run_id, "dataset": name, "windows": test.windows, "metrics": test.metrics}
