"""`forecast compare`: the experiment's model runs side by side, from mlflow.search_runs, best
selection MAE first (the mean over split.selection_folds folds of validation, before test: what
models are chosen by);
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
    "params.split.selection_folds": "k",
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
RUN_ID = "run_id"
# --json's keys for the table's columns (the short "run id" is left out: run_id is whole)
JSON_KEYS = {
    "model": "model",
    "dataset": "dataset",
    "L": "lookback",
    "H": "horizon",
    "hidden": "hidden_size",
    "layers": "layers",
    "selection MAE": "selection_mae",
    "k": "selection_folds",
    "naive sel. MAE": "naive_selection_mae",
    "test MAE": "test_mae",
    "naive test MAE": "naive_test_mae",
    "test skill vs naive": "test_skill_vs_naive",
    "seconds": "seconds",
    "version": "version",
    "status": "status",
    RUN_ID: RUN_ID,
}


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
        return pd.DataFrame(columns=[*COLUMNS.values(), "seconds", "version", "status", "run id", RUN_ID])
    view = pd.DataFrame({label: runs.get(column) for column, label in COLUMNS.items()})
    view["k"] = view["k"].fillna("1")  # runs logged before split.selection_folds scored one fold
    view["seconds"] = (runs["end_time"] - runs["start_time"]).dt.total_seconds()
    aliases: dict[str, dict[str, list[str]]] = {}  # model name -> version -> its aliases
    view["version"] = [registered_as(run_id, aliases) for run_id in runs["run_id"]]
    view["status"] = runs["status"]
    view["run id"] = runs["run_id"].str[:8]
    view[RUN_ID] = runs["run_id"]  # whole, for --json; the table shows the short one
    return view.sort_values(ORDER_BY, na_position="last", kind="stable").reset_index(drop=True)


def registered_as(run_id: str, aliases: dict[str, dict[str, list[str]]]) -> str | None:
    """ "demo-forecaster v2 @champion" for a run whose model was registered, else None.

    The aliases come from the registered model (``aliases`` caches them per name): the versions
    ``search_model_versions`` returns carry none (MLflow 3.17 with a SQL store)."""
    client = mlflow.MlflowClient()
    try:
        versions = client.search_model_versions(f"run_id = '{run_id}'")
        for name in {v.name for v in versions} - set(aliases):
            aliases[name] = {}
            for alias, number in client.get_registered_model(name).aliases.items():
                aliases[name].setdefault(str(number), []).append(alias)
    except MlflowException:
        return None
    labels = []
    for version in versions:
        held = "".join(f" @{alias}" for alias in sorted(aliases[version.name].get(str(version.version), [])))
        labels.append(f"{version.name} v{version.version}{held}")
    return ", ".join(labels) or None


def formatted(column: str, value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if column in DECIMALS and isinstance(value, int | float):
        return f"{value:.{DECIMALS[column]}f}"
    return value


def print_comparison(experiment: str, runs: pd.DataFrame) -> None:
    """The table, with room for "v2 @champion": when every registered run is a version of one
    model, its name goes in the title instead of every row, and the status column, which would
    only ever say FINISHED, is left out when every run finished."""
    title = (
        f"experiment {experiment!r}: {len(runs)} model run(s), best selection MAE first "
        "(chosen on the selection folds, validation's, before test; test is only reported)"
    )
    labels = runs["version"].dropna()  # "NAME vN @alias", or several joined by ", "
    names = {label.rsplit(" v", 1)[0] for label in labels}
    if len(names) == 1 and not labels.str.contains(", ").any():
        name = names.pop()
        runs = runs.assign(version=runs["version"].str.removeprefix(f"{name} "))
        title += f"; versions of {name}"
    runs = runs.drop(columns=RUN_ID)
    if runs["status"].eq("FINISHED").all():
        runs = runs.drop(columns="status")
    rules = sorted(runs["k"].dropna().unique())
    if len(rules) > 1:  # selection MAEs over different folds: the order is not like for like
        title += (
            f"; k: the selection folds each MAE is the mean over, which differ ({', '.join(rules)}): "
            "not like for like (the promotion gate scores both models on the candidate's folds)"
        )
    else:
        runs = runs.drop(columns="k")
    columns = list(runs.columns)
    rows = [
        [formatted(column, value) for column, value in zip(columns, record, strict=True)]
        for record in runs.itertuples(index=False)
    ]
    table(title, columns, rows)


# MLflow stores params as text
INTEGER_PARAMS = {"lookback", "horizon", "hidden_size", "layers", "selection_folds"}


def json_value(key: str, value: object) -> object:
    """A cell as JSON has it: NaN and missing as null, numpy numbers as Python's, window and
    network sizes as the integers they are."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if key in INTEGER_PARAMS and isinstance(value, str) and value.isdigit():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def comparison_json(experiment: str, runs: pd.DataFrame) -> dict[str, object]:
    """`forecast compare --json`: the table's rows, in its order, every value unrounded, the run
    id whole."""
    rows = [
        {key: json_value(key, record[column]) for column, key in JSON_KEYS.items()}
        for record in runs.to_dict("records")
    ]
    return {"experiment": experiment, "order_by": "selection_mae", "runs": rows}
