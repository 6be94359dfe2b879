"""`forecast compare`: the experiment's model runs side by side, from mlflow.search_runs, best
selection MAE first (the later part of validation, which no fit saw: what models are chosen by);
test MAE is shown beside it and decides nothing. Registered runs show their version and aliases."""

from __future__ import annotations

import math

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException

from forecaster.errors import ForecasterError
from pipelines.console import table

COLUMNS = {
    "tags.model.family": "model",
    "params.dataset.name": "dataset",
    "params.window.lookback": "L",
    "params.window.horizon": "H",
    "params.model.hidden_size": "hidden",
    "params.model.layers": "layers",
    "metrics.selection_mae": "selection MAE",
    "metrics.naive_selection_mae": "naive sel. MAE",
    "metrics.test_mae": "test MAE",
    "metrics.naive_test_mae": "naive test MAE",
    "metrics.test_skill_vs_naive": "test skill vs naive",
}
DECIMALS = {  # fixed per column, so 2.0003 never prints as 2
    "selection MAE": 4,
    "naive sel. MAE": 4,
    "test MAE": 4,
    "naive test MAE": 4,
    "test skill vs naive": 3,
    "seconds": 1,
}
ORDER_BY = "selection MAE"


def compare_runs(experiment: str, limit: int = 50) -> pd.DataFrame:
    if mlflow.get_experiment_by_name(experiment) is None:
        raise ForecasterError(f"experiment {experiment!r} not found on {mlflow.get_tracking_uri()}")
    runs = mlflow.search_runs(
        experiment_names=[experiment],
        filter_string="tags.role = 'model'",
        order_by=["metrics.selection_mae ASC"],
        max_results=limit,
    )
    if runs.empty:
        return pd.DataFrame(columns=[*COLUMNS.values(), "seconds", "version", "status", "run id"])
    view = pd.DataFrame({label: runs.get(column) for column, label in COLUMNS.items()})
    view["seconds"] = (runs["end_time"] - runs["start_time"]).dt.total_seconds()
    view["version"] = [registered_as(run_id) for run_id in runs["run_id"]]
    view["status"] = runs["status"]
    view["run id"] = runs["run_id"].str[:8]
    return view.sort_values(ORDER_BY, na_position="last", kind="stable").reset_index(drop=True)


def registered_as(run_id: str) -> str | None:
    """ "demo-forecaster v2 @champion" for a run whose model was registered, else None."""
    try:
        versions = mlflow.MlflowClient().search_model_versions(f"run_id = '{run_id}'")
    except MlflowException:
        return None
    labels = []
    for version in versions:
        aliases = "".join(f" @{alias}" for alias in sorted(version.aliases or []))
        labels.append(f"{version.name} v{version.version}{aliases}")
    return ", ".join(labels) or None


def formatted(column: str, value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if column in DECIMALS and isinstance(value, int | float):
        return f"{value:.{DECIMALS[column]}f}"
    return value


def print_comparison(experiment: str, runs: pd.DataFrame) -> None:
    columns = list(runs.columns)
    rows = [
        [formatted(column, value) for column, value in zip(columns, record, strict=True)]
        for record in runs.itertuples(index=False)
    ]
    table(
        f"experiment {experiment!r}: {len(runs)} model run(s), best selection MAE first "
        "(chosen on the later part of validation; test is only reported)",
        columns,
        rows,
    )
