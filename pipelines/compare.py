"""`forecast compare`: the experiment's model runs side by side, from mlflow.search_runs."""

from __future__ import annotations

import math

import mlflow
import pandas as pd

from forecaster.errors import ForecasterError
from pipelines.console import table

COLUMNS = {
    "tags.model.family": "model",
    "params.dataset.name": "dataset",
    "params.window.lookback": "L",
    "params.window.horizon": "H",
    "params.model.hidden_size": "hidden",
    "params.model.layers": "layers",
    "metrics.best_val_mae": "val MAE",
    "metrics.test_mae": "test MAE",
    "metrics.naive_test_mae": "naive MAE",
    "metrics.test_skill_vs_naive": "skill vs naive",
}


def compare_runs(experiment: str, limit: int = 50) -> pd.DataFrame:
    if mlflow.get_experiment_by_name(experiment) is None:
        raise ForecasterError(f"experiment {experiment!r} not found on {mlflow.get_tracking_uri()}")
    runs = mlflow.search_runs(
        experiment_names=[experiment],
        filter_string="tags.role = 'model'",
        order_by=["metrics.test_mae ASC"],
        max_results=limit,
    )
    if runs.empty:
        return pd.DataFrame(columns=[*COLUMNS.values(), "seconds", "status", "run id"])
    view = pd.DataFrame({label: runs.get(column) for column, label in COLUMNS.items()})
    view["seconds"] = (runs["end_time"] - runs["start_time"]).dt.total_seconds()
    view["status"] = runs["status"]
    view["run id"] = runs["run_id"].str[:8]
    return view.sort_values("test MAE", na_position="last").reset_index(drop=True)


def print_comparison(experiment: str, runs: pd.DataFrame) -> None:
    rows = [
        [None if isinstance(v, float) and math.isnan(v) else v for v in record]
        for record in runs.itertuples(index=False)
    ]
    table(
        f"experiment {experiment!r}: {len(runs)} model run(s), best test MAE first", list(runs.columns), rows
    )
