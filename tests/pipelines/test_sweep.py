"""`forecast sweep` end to end on tiny settings, with Optuna's RDB storage."""

from __future__ import annotations

import json

import mlflow
import optuna
import pytest

from tests.pipelines.helpers import forecast, tiny_settings
from tests.pipelines.test_promotion_lock import forked_commands
from tests.postgres import fresh_databases, why_unavailable

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast


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
    assert summary["best_selection_mae"] == min(t["selection_mae"] for t in complete)
    # the study lives in the shared storage and can be resumed by another machine
    assert len(optuna.load_study(study_name="tiny", storage=storage).trials) == 3
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("sweeps").experiment_id
    parent = client.search_runs([experiment], "tags.role = 'sweep'")
    assert len(parent) == 1 and parent[0].data.metrics["best_selection_mae"] == summary["best_selection_mae"]
    trials = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent[0].info.run_id}'")
    assert len(trials) == 3 and all(t.data.tags["role"] == "sweep-trial" for t in trials)
    best = summary["best_run"]
    assert best["registered_name"] == "swept" and best["promoted"] is True
    best_run = client.get_run(best["run_id"])
    assert best_run.data.params["model.hidden_size"] == str(summary["best_params"]["hidden_size"])
    assert best_run.data.params["window.lookback"] == str(summary["best_params"]["lookback"])


def test_workers_on_one_study_add_up_their_trials_and_register_the_best_once(postgres_url, tmp_path):
    """Two `forecast sweep` processes on one study in PostgreSQL (and one MLflow store there):
    2 + 2 trials make a study of 4, and one of the two re-trains and registers the best."""
    if postgres_url is None:
        pytest.skip(f"PostgreSQL unavailable: {why_unavailable()}")
    storage, tracking = fresh_databases(postgres_url, "sweep_study", "sweep_mlflow")
    mlflow.MlflowClient(tracking).search_experiments()  # MLflow's tables, made once, before the workers
    config = tmp_path / "base.yaml"
    config.write_text("data: {dataset: melbourne-temp}\ntracking: {experiment: shared-sweep}\n")
    command = [
        "sweep", "--config", str(config), "--trials", "2", *tiny_settings(), "--study", "shared",
        "--register", "swept", "--tracking-uri", tracking,
    ]  # fmt: skip
    # two processes, forked once the CLI is imported (its imports paid once, not per worker)
    preload = ["pipelines.sweep", "pipelines.train", "optuna.storages"]
    environment = {"OPTUNA_STORAGE": storage}  # as the Kubernetes Job gets it, from a Secret
    workers = forked_commands(tmp_path, [command, command], preload, env=environment)
    outputs = [output for _, output in workers]
    assert [code for code, _ in workers] == [0, 0], outputs

    study = optuna.load_study(study_name="shared", storage=storage)
    assert sorted(trial.number for trial in study.trials) == [0, 1, 2, 3]  # the trials add up
    for trial in study.trials:  # a configuration scored before is not trained again
        earlier = [t for t in study.trials if t.params == trial.params and t.number < trial.number]
        if earlier and trial.state == optuna.trial.TrialState.COMPLETE:
            assert trial.user_attrs.get("same_as") == earlier[0].number
    versions = mlflow.MlflowClient(tracking).search_model_versions("name = 'swept'")
    assert len(versions) == 1  # the best registered once
    assert sum("another worker of this study re-trains" in output for output in outputs) == 1


def test_a_seq2seq_trial_drops_the_base_configs_highway_the_step_by_step_decoder_has_not():
    """A base config with a many-to-one highway stays sweepable: a seq2seq trial (step-by-step
    decoder) is built without the skip instead of being refused and ending the study."""
    import optuna

    from pipelines.config import load_run_config
    from pipelines.sweep import suggest

    base = load_run_config(None, ["data.dataset=melbourne-temp", "window.lookback=14", "model.highway=7"])
    trial = optuna.trial.FixedTrial(
        {
            "architecture": "seq2seq", "cell": "gru", "bidirectional": False, "hidden_size": 16,
            "layers": 1, "dropout": 0.1, "lookback": 14, "learning_rate": 1e-3, "attention": "bahdanau",
            "teacher_forcing": 0.5, "teacher_forcing_decay": 0.9,
        }
    )  # fmt: skip
    config = suggest(trial, base)
    assert config.model.architecture == "seq2seq" and config.model.highway == 0
    many_to_one = suggest(optuna.trial.FixedTrial({**trial.params, "architecture": "many_to_one"}), base)
    assert many_to_one.model.highway == 7


def test_a_many_to_one_trial_of_a_seq2seq_base_config_has_no_attention():
    """A seq2seq base's model.attention is not carried into a many-to-one trial, which the config
    would refuse (attention is seq2seq's), ending the study."""
    import optuna

    from pipelines.config import load_run_config
    from pipelines.sweep import suggest

    base = load_run_config(
        None, ["data.dataset=melbourne-temp", "window.lookback=14", "model.architecture=seq2seq"]
    )
    assert base.model.attention == "bahdanau"
    trial = optuna.trial.FixedTrial(
        {
            "architecture": "many_to_one", "cell": "gru", "bidirectional": False, "hidden_size": 16,
            "layers": 1, "dropout": 0.1, "lookback": 14, "learning_rate": 1e-3,
        }
    )  # fmt: skip
    config = suggest(trial, base)
    assert config.model.architecture == "many_to_one" and config.model.attention == "none"
