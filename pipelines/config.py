"""A training run's config: the forecasting config plus where and how to track it.

YAML file -> ``--set key=value`` overrides -> one validated RunConfig; validation errors become one
readable ConfigError naming each bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from forecaster.config import ForecastConfig, StrictModel
from forecaster.errors import ConfigError
from forecaster.options import config_error, read_yaml


class TrackingConfig(StrictModel):
    experiment: str = "forecasting"
    run_name: str | None = None
    registered_model: str | None = Field(None, description="register under this name; empty: do not")
    alias: str = "champion"
    allow_worse_than_naive: bool = Field(
        False, description="give the alias even when the model's selection MAE is not below naive's"
    )
    onnx_export: bool = Field(
        True,
        description="export the network to ONNX beside its weights (kept only when ONNX Runtime "
        "matches torch); false skips it: the model then serves with torch. For runs that are only "
        "compared, never served: at L=336, H=720 the export and its check took minutes",
    )
    plots: bool = Field(
        True,
        description="log the forecast, error-by-step and attention plots (plots/*.png); false skips "
        "them: for runs that are compared by their figures, never looked at one by one",
    )


class CommandDefaults(StrictModel):
    """The defaults of the commands' own options (not a model's or a run's settings, which are
    ForecastConfig's and TrackingConfig's): here, beside the config, so that pipelines/commands/
    holds none; `forecast --help` shows them as these values."""

    experiment: str = TrackingConfig.model_fields["experiment"].default  # compare's
    alias: str = TrackingConfig.model_fields["alias"].default  # register's, promote's
    evaluation_experiment: str = "evaluations"  # where `forecast evaluate` records its scores
    compare_limit: int = 50
    stale_minutes: float = 60.0  # without a checkpoint, a run trained elsewhere is stale
    sweep_trials: int = 20
    backtest_folds: int = 3
    retrain_data_dir: str = "retrain-data"
    predict_engine: str = "local"
    spark_master: str = "local[2]"
    serve_host: str = "127.0.0.1"
    serve_port: int = 8000
    serve_workers: int = 1
    ui_port: int = 5000


COMMAND_DEFAULTS = CommandDefaults()


class RunConfig(ForecastConfig):
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    def forecast_config(self) -> ForecastConfig:
        """What the model carries: everything but the tracking settings."""
        return ForecastConfig.model_validate(self.model_dump(exclude={"tracking"}))


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """``model.hidden_size=128`` sets data['model']['hidden_size'] = 128 (value parsed as YAML)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. model.hidden_size=128")
    key, raw = assignment.split("=", 1)
    *parents, leaf = key.strip().split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {part!r} is not a section")
    node[leaf] = override_value(assignment, raw)


def override_value(assignment: str, raw: str) -> Any:
    """The value of ``--set KEY=VALUE``, read as YAML (so 128 is a number and [1, 2] a list). Text
    YAML cannot read is the text as typed: ``data.time_format=%d/%m/%Y`` (a YAML directive sign
    first) means that format, and a setting that needs a number or a list says so by name when
    validated."""
    if not raw.strip():
        return None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw.strip()


def validate(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, source) from None


def load_run_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    data = read_yaml(path) if path else {}
    for assignment in overrides or []:
        apply_override(data, assignment)
    return validate(data, source=str(path) if path else "settings")
