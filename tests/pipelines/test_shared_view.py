"""The MLflow UI's shared view `forecast compare` and `forecast train` write: its columns and charts
are the metrics the experiment's model runs log (no empty columns), ordered by selection MAE, the
baselines' nested runs out of the rows; `forecast ui` lists it and `compare` prints its URL.
(test_mlflow_ui.py opens it in a browser.)"""

from __future__ import annotations

import json
import os

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import PERMISSION_DENIED

from pipelines.shared_view import (
    SHARE_KEY,
    TAG_PREFIX,
    shared_views,
    view_metrics,
    view_url,
    write_shared_view,
)
from tests.pipelines.helpers import forecast


def log_model_run(client: mlflow.MlflowClient, experiment_id: str, metrics: dict[str, float]) -> str:
    """A run as `forecast train` tags and logs it (role=model, family), with a nested baseline."""
    run = client.create_run(experiment_id, tags={"role": "model", "model.family": "lstm"})
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, value)
    child = client.create_run(experiment_id, tags={"role": "baseline", "mlflow.parentRunId": run.info.run_id})
    # a baseline logs metric names no model run has: they must not become columns
    client.log_metric(child.info.run_id, "seasonal_naive_test_mae", 1.0)
    client.log_metric(child.info.run_id, "test_coverage_95", 0.9)
    return run.info.run_id


def stored_view(client: mlflow.MlflowClient, experiment_id: str) -> dict:
    return json.loads(client.get_experiment(experiment_id).tags[TAG_PREFIX + SHARE_KEY])


def test_the_view_shows_what_the_model_runs_log_best_selection_mae_first(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment("forecasting", artifact_location=tmp_path.as_uri())
    logged = {"selection_mae": 2.0, "test_mae": 2.5, "naive_test_mae": 3.0, "test_skill_vs_naive": 0.1}
    log_model_run(client, experiment_id, {**logged, "test_coverage_80": 0.8, "test_rmse": 3.3})
    log_model_run(client, experiment_id, logged)  # a run without intervals

    fragment = write_shared_view(client, experiment_id)

    view = stored_view(client, experiment_id)
    metrics = ["selection_mae", "test_mae", "naive_test_mae", "test_skill_vs_naive", "test_coverage_80"]
    assert view["selectedColumns"] == [
        "tags.`model.family`",
        *(f"metrics.`{m}`" for m in metrics),
        "tags.`registered`",
    ]
    assert view["columnOrder"][2:-1] == view["selectedColumns"]  # after run name and date
    assert view["orderByKey"] == "metrics.`selection_mae`" and view["orderByAsc"] is True
    assert view["searchFilter"] == "tags.role = 'model'"  # the baselines' nested runs are no rows
    assert view["runsExpanded"] == {}
    charts = view["compareRunCharts"]
    grouped, *single = charts  # first: test MAE beside the baselines', per run
    assert grouped["type"] == "BAR" and grouped["selectedMetricKeys"] == ["test_mae", "naive_test_mae"]
    assert [(c["type"], c["metricKey"]) for c in single] == [("BAR", m) for m in metrics]
    shown_section = next(s for s in view["compareRunSections"] if s["display"])
    assert {c["metricSectionId"] for c in charts} == {shown_section["uuid"]}
    assert fragment == (
        f"#/experiments/{experiment_id}/runs?viewStateShareKey={SHARE_KEY}&workflowType=machine_learning"
    )

    # a later run logging more (a seasonal baseline) widens the same view, under the same key
    log_model_run(client, experiment_id, {**logged, "seasonal_naive_test_mae": 2.8})
    assert write_shared_view(client, experiment_id) == fragment
    widened = stored_view(client, experiment_id)
    assert "metrics.`seasonal_naive_test_mae`" in widened["selectedColumns"]
    assert widened["compareRunCharts"][0]["selectedMetricKeys"] == [
        "test_mae", "naive_test_mae", "seasonal_naive_test_mae"
    ]  # fmt: skip


def test_view_metrics_order_and_nothing_that_was_not_logged():
    logged = {
        "test_coverage_95",
        "test_coverage_80",
        "test_coverage_80_by_step",  # a per-step series, not a figure
        "seasonal_naive_test_mae",
        "naive_test_mae",
        "test_mae",
        "selection_mae",
        "val_loss",
    }
    assert view_metrics(logged) == [
        "selection_mae",
        "test_mae",
        "naive_test_mae",
        "seasonal_naive_test_mae",
        "test_coverage_80",
        "test_coverage_95",
    ]
    assert view_metrics({"test_mae"}) == ["test_mae"]


def test_the_url_points_at_the_ui_serving_the_store():
    fragment_url = "#/experiments/7/runs?viewStateShareKey=forecast-compare&workflowType=machine_learning"
    assert view_url("sqlite:///mlflow.db", "7") == f"http://127.0.0.1:5000/{fragment_url}"
    assert view_url("sqlite:///mlflow.db", "7", port=5111) == f"http://127.0.0.1:5111/{fragment_url}"
    assert view_url("https://mlflow.example.org/", "7") == f"https://mlflow.example.org/{fragment_url}"
    # a tracking server's credentials are never printed with the address
    with_password = view_url("https://alice:s3cret@mlflow.example.org:8443/mlflow/", "7")
    assert with_password == f"https://mlflow.example.org:8443/mlflow/{fragment_url}"


def test_forecast_ui_lists_views_without_creating_a_missing_store(tmp_path):
    missing = tmp_path / "none.db"
    assert shared_views(f"sqlite:///{missing}") == [] and not missing.exists()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    with_view = client.create_experiment("demo", artifact_location=tmp_path.as_uri())
    client.create_experiment("other", artifact_location=tmp_path.as_uri())
    write_shared_view(client, with_view)
    assert shared_views(uri) == [("demo", with_view)]


def test_forecast_ui_prints_each_view_on_its_port(tmp_path, monkeypatch):
    """Printed before it becomes `mlflow ui` (the exec is left out here, as in test_cli.py)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment("demo", artifact_location=tmp_path.as_uri())
    write_shared_view(client, experiment_id)
    monkeypatch.setattr(os, "execvpe", lambda file, args, env: None)
    result = forecast("ui", "--port", "5111", "--tracking-uri", uri)
    assert result.exit_code == 0, result.output
    assert f"demo: runs compared at {view_url(uri, experiment_id, port=5111)}" in result.stdout


def test_compare_on_a_store_refusing_the_view_still_compares(tracking_uri, monkeypatch):
    """A user who may only read the store (a tracking server's READ permission) still gets the
    table: the view that cannot be written costs a warning line."""
    mlflow.MlflowClient(tracking_uri).create_experiment("read-only")

    def refuse(*args, **kwargs):
        raise MlflowException("Permission denied", error_code=PERMISSION_DENIED)

    monkeypatch.setattr(mlflow.MlflowClient, "set_experiment_tag", refuse)
    result = forecast("compare", "--experiment", "read-only", "--tracking-uri", tracking_uri)
    assert result.exit_code == 0, result.output
    assert "experiment 'read-only'" in result.stdout
    assert "comparison view was not updated" in result.stderr
