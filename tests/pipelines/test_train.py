"""End to end through a real (temporary) SQLite MLflow store, for every model family."""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow
import numpy as np
import pytest

from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from pipelines.config import load_run_config
from pipelines.train import run_training
from tests.conftest import FAMILIES, ONNX_AND_PLOTS, TINY
from tests.pipelines.helpers import forecast, predict_csv, train_json

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_train_logs_everything_and_registers(family, tracking_uri):
    result = train_json(tracking_uri, *FAMILIES[family], *ONNX_AND_PLOTS, register="tiny")
    client = mlflow.MlflowClient(tracking_uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    for name in (
        "test_mae",
        "test_rmse",
        "test_smape",
        "test_mase",
        "naive_test_mae",
        "seasonal_naive_test_mae",
        "test_skill_vs_naive",
        "best_val_mae",
    ):
        assert np.isfinite(metrics[name]), name
    assert metrics["test_mae"] == pytest.approx(result["metrics"]["model"]["mae"])
    assert 0 < metrics["test_coverage_80"] <= 1 and metrics["test_interval_width_80"] > 0
    assert result["intervals"]["80"]["coverage"] == pytest.approx(metrics["test_coverage_80"])
    # per-epoch curves, stepped by epoch
    for name in ("train_loss", "val_loss", "val_mae"):
        history = client.get_metric_history(run.info.run_id, name)
        assert [m.step for m in history] == [0, 1], name
    assert len(client.get_metric_history(run.info.run_id, "test_mae_by_step")) == 4
    params = run.data.params
    assert params["model.hidden_size"] == "8" and params["dataset.name"] == "melbourne-temp"
    assert len(params["dataset.sha256"]) == 64 and int(params["split.test.rows"]) > 0
    # what the network has: filtering runs on model.attention = 'bahdanau' finds attention models only
    assert params["model.attention"] == ("bahdanau" if family == "seq2seq-attention" else "none")
    # and only settings its network reads: no decoder or attention layout for a many-to-one one
    seq2seq = family.startswith("seq2seq")
    assert ("model.decoder" in params) == seq2seq
    assert ("model.attention_layout" in params) == (family == "seq2seq-attention")
    assert run.data.tags["mlflow.source.git.commit"]
    assert run.data.tags["version.torch"].startswith("2.13.0")
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "dataset.json", "plots", "evaluation"} <= artifacts
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    expected = {"plots/forecast_vs_actual.png", "plots/error_by_step.png"}
    if family == "seq2seq-attention":
        expected.add("plots/attention.png")
    # only a residual attention (the direct decoder's `lags` layout) has a retrieved term to weigh
    assert "attention_retrieved_mse_ratio" not in result
    assert "test_attention_retrieved_mse_ratio" not in metrics
    assert plots == expected
    version = client.get_model_version_by_alias("tiny", "champion")
    assert str(version.version) == result["registered_version"]
    assert version.tags["dataset"] == "melbourne-temp" and version.tags["horizon"] == "4"
    assert "test MAE" in version.description
    baselines = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'")
    assert {b.data.tags["model.family"] for b in baselines} == {"naive", "seasonal_naive"}
    assert all("test_mae" in b.data.metrics for b in baselines)  # same names as the model


def test_a_residual_attention_run_logs_its_retrieved_terms_mse_ratio_and_so_does_its_evaluation(
    tracking_uri,
):
    """`forecast train` and `forecast evaluate` of the registered model, which ONNX Runtime runs
    (the export is verified), log the same ratios on selection and test."""
    direct = ["model.architecture=seq2seq", "model.attention=bahdanau", "model.decoder=direct"]
    result = train_json(tracking_uri, *direct, "tracking.onnx_export=true", register="residual")
    ratios = result["attention_retrieved_mse_ratio"]  # MSE with / without what is retrieved
    assert sorted(ratios) == ["selection", "test"] and all(np.isfinite(r) and r > 0 for r in ratios.values())
    client = mlflow.MlflowClient(tracking_uri)
    metrics = client.get_run(result["run_id"]).data.metrics
    for split, ratio in ratios.items():
        assert metrics[f"{split}_attention_retrieved_mse_ratio"] == pytest.approx(ratio)
    assert ratios["selection"] != pytest.approx(ratios["test"])  # two splits, not one figure twice
    evaluated = forecast(
        "evaluate", "--model-uri", "models:/residual@champion", "--json", "--tracking-uri", tracking_uri
    )
    assert evaluated.exit_code == 0, evaluated.output
    document = json.loads(evaluated.stdout.strip().splitlines()[-1])
    again = client.get_run(document["run_id"]).data.metrics
    for split, ratio in ratios.items():
        assert again[f"{split}_attention_retrieved_mse_ratio"] == pytest.approx(ratio, rel=1e-5)
        assert document["attention_retrieved_mse_ratio"][split] == pytest.approx(ratio, rel=1e-5)


RELOAD = """
import os, sys
import mlflow, numpy as np
mlflow.set_tracking_uri(sys.argv[1])
windows = np.load(sys.argv[2])
for runtime, out in (("torch", sys.argv[3]), ("onnx", sys.argv[4])):
    os.environ["INFERENCE_RUNTIME"] = runtime  # read as the pyfunc loads
    model = mlflow.pyfunc.load_model("models:/reload@champion")
    assert model.unwrap_python_model().predictor.runtime.name == runtime
    np.save(out, model.predict(windows))
    bounds = model.predict(windows, params={"intervals": True})
    assert sorted(bounds) == ["0.1", "0.9", "forecast"], sorted(bounds)
    assert (bounds["0.1"] < bounds["forecast"]).all() and (bounds["forecast"] < bounds["0.9"]).all()
"""


def test_registered_pyfunc_reloads_in_a_fresh_process_with_identical_forecasts(tracking_uri, tmp_path):
    """Also `forecast register` of this existing run (an ONNX export's) under another name. No
    plots: nothing here reads them (the families' test does)."""
    export = "tracking.onnx_export=true"
    settings = [*TINY, export, "model.architecture=seq2seq", "tracking.registered_model=reload"]
    config = load_run_config(None, settings)
    outcome = run_training(config, tracking_uri)
    prepared = prepare_series(load_from_config(config.data), config.forecast_config())
    windows = prepared.windows("test").past()[:, :, 0]  # raw, unscaled (N, L)
    np.save(tmp_path / "windows.npy", windows)
    # one fresh process loads it with each runtime: the network trained, and its export verified
    # at logging
    subprocess.run(
        [sys.executable, "-c", RELOAD, tracking_uri, tmp_path / "windows.npy", tmp_path / "torch.npy",
         tmp_path / "onnx.npy"],
        check=True,
        timeout=120,
    )  # fmt: skip
    np.testing.assert_array_equal(np.load(tmp_path / "torch.npy"), outcome.test_forecasts)
    scale = prepared.scaler.std[0]  # the export's tolerance (1e-5 on the network's scale) in units
    np.testing.assert_allclose(
        np.load(tmp_path / "onnx.npy"), outcome.test_forecasts, rtol=0, atol=1e-5 * scale
    )

    # `forecast register` registers an existing run
    result = forecast(
        "register", "--run-id", outcome.run_id, "--name", "later", "--tracking-uri", tracking_uri,
        "--allow-worse-than-naive",  # a tiny model: worse than naive
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    version = mlflow.MlflowClient(tracking_uri).get_model_version_by_alias("later", "champion")
    assert version.run_id == outcome.run_id
    assert version.tags["runtimes"] == "torch,onnx"  # from the run's tags, as `train --register` does


def test_compare_lists_runs_best_first_and_promote_refuses_a_worse_candidate(tracking_uri):
    good = train_json(tracking_uri, "train.epochs=3", register="duel")
    # An untrained network (learning rate ~0, no level normalisation) must lose on the same data.
    bad = train_json(
        tracking_uri,
        "train.epochs=1",
        "train.learning_rate=1e-9",
        "model.level_norm=none",
        "train.seed=7",
        register="duel",
    )
    assert good["promoted"] is True and bad["promoted"] is False
    client = mlflow.MlflowClient(tracking_uri)
    assert str(client.get_model_version_by_alias("duel", "champion").version) == good["registered_version"]
    refused = forecast(
        "promote", "--name", "duel", "--version", bad["registered_version"], "--tracking-uri", tracking_uri
    )
    assert refused.exit_code == 1
    assert "not lower" in refused.stdout
    forced = forecast(
        "promote",
        "--name",
        "duel",
        "--version",
        bad["registered_version"],
        "--force",
        "--tracking-uri",
        tracking_uri,
    )
    assert forced.exit_code == 0 and "moved" in forced.stdout
    again = forecast(  # the alias is where it was asked to be: done, not a refusal (0N is version N)
        "promote",
        "--name",
        "duel",
        "--version",
        f"0{bad['registered_version']}",
        "--tracking-uri",
        tracking_uri,
    )
    assert again.exit_code == 0 and "already holds @champion" in again.stdout
    listed = forecast("compare", "--experiment", "forecasting", "--tracking-uri", tracking_uri)
    assert listed.exit_code == 0
    assert listed.stdout.index(good["run_id"][:8]) < listed.stdout.index(bad["run_id"][:8])
    # the forced version holds @champion, and the table says so on its row (which may wrap)
    lines = listed.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if bad["run_id"][:8] in line)
    assert "@champion" in " ".join(lines[row : row + 2]) and listed.stdout.count("@champion") == 1
    assert "versions of duel" in " ".join(listed.stdout.split())


def test_evaluate_predict_and_backtest(tracking_uri, tmp_path):
    """Of a run without the ONNX export (TINY's tracking.onnx_export=false), which is also how
    runs only compared are trained (e.g. the ETT benchmark's): the run says so in its tags and the
    model still predicts, with torch."""
    assert "tracking.onnx_export=false" in TINY
    trained = train_json(tracking_uri, register="eval")
    tags = mlflow.MlflowClient(tracking_uri).get_run(trained["run_id"]).data.tags
    assert tags["runtimes"] == "torch" and "tracking.onnx_export is false" in tags["onnx_export"]
    evaluated = forecast(
        "evaluate", "--model-uri", "models:/eval@champion", "--json", "--tracking-uri", tracking_uri
    )
    assert evaluated.exit_code == 0, evaluated.output
    scores = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert scores["metrics"]["model"]["mae"] == pytest.approx(trained["metrics"]["model"]["mae"])
    out = tmp_path / "next.csv"
    predict_csv("models:/eval@champion", tracking_uri, out)
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 4 and lines[1].startswith("1991-01-01")  # the day after the data ends
    by_run = tmp_path / "by-run.csv"  # by its run's model URI too
    predict_csv(trained["model_uri"], tracking_uri, by_run)
    assert len(by_run.read_text().splitlines()) == 1 + 4
    config = tmp_path / "bt.yaml"
    config.write_text("data: {dataset: melbourne-temp}\n")
    settings = []
    for item in TINY:
        settings += ["--set", item]
    backtest = forecast(
        "backtest", "--config", config, "--folds", "2", *settings, "--json", "--tracking-uri", tracking_uri
    )
    assert backtest.exit_code == 0, backtest.output
    summary = json.loads(backtest.stdout.strip().splitlines()[-1])
    assert len(summary["folds"]) == 2 and "naive" in summary["summary"]
    assert len(summary["skill_vs_naive"]) == 2
    client = mlflow.MlflowClient(tracking_uri)
    folds = client.search_runs(
        [client.get_run(summary["run_id"]).info.experiment_id],
        f"tags.mlflow.parentRunId = '{summary['run_id']}'",
    )
    assert len(folds) == 2


def test_quantile_model_trains_and_reports_its_own_intervals(tracking_uri):
    result = train_json(tracking_uri, "train.loss=quantile", "model.quantiles=[0.1,0.5,0.9]")
    run = mlflow.MlflowClient(tracking_uri).get_run(result["run_id"])
    assert 0 < run.data.metrics["test_coverage_80"] <= 1
    assert run.data.params["model.quantiles"] == "0.1,0.5,0.9"
