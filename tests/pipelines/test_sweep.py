"""`forecast sweep` end to end on tiny settings, with Optuna's RDB storage."""

from __future__ import annotations

import json

import mlflow
import optuna

from tests.pipelines.helpers import forecast, tiny_settings


def test_sweep_runs_trials_as_nested_runs_and_registers_the_best(tracking_uri, tmp_path):
    config = tmp_path / "base.yaml"
    config.write_text("data: {dataset: melbourne-temp}\ntracking: {experiment: sweeps}\n")
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    result = forecast(
        "sweep",
        "--config",
        config,
        "--trials",
        "3",
        *tiny_settings(),
        "--storage",
        storage,
        "--study",
        "tiny",
        "--register",
        "swept",
        "--json",
        "--tracking-uri",
        tracking_uri,
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(summary["trials"]) == 3
    complete = [t for t in summary["trials"] if t["state"] == "COMPLETE"]
    assert summary["best_val_mae"] == min(t["val_mae"] for t in complete)
    # the study lives in the shared storage and can be resumed by another machine
    assert len(optuna.load_study(study_name="tiny", storage=storage).trials) == 3
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("sweeps").experiment_id
    parent = client.search_runs([experiment], "tags.role = 'sweep'")
    assert len(parent) == 1 and parent[0].data.metrics["best_val_mae"] == summary["best_val_mae"]
    trials = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent[0].info.run_id}'")
    assert len(trials) == 3 and all(t.data.tags["role"] == "sweep-trial" for t in trials)
    best = summary["best_run"]
    assert best["registered_name"] == "swept" and best["promoted"] is True
    best_run = client.get_run(best["run_id"])
    assert best_run.data.params["model.hidden_size"] == str(summary["best_params"]["hidden_size"])
    assert best_run.data.params["window.lookback"] == str(summary["best_params"]["lookback"])
