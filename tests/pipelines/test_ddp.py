"""Distributed training: 2 CPU processes (gloo) make one MLflow run and one registered version,
and a DDP run killed with all its ranks resumes to the run never interrupted."""

from __future__ import annotations

import mlflow
import pytest

from tests.conftest import empty_tracking_store

pytestmark = pytest.mark.integration


def test_ddp_training_killed_with_its_whole_process_group_resumes_to_the_uninterrupted_run(tmp_path):
    """A machine lost mid-training under DDP: every rank SIGKILLed at once. `--resume` (rank zero
    owns the run) continues it to the same curve and weights as a DDP run never interrupted; the
    two ranks make one run, log one point per epoch (not one per rank) and register one version."""
    import torch

    from tests.pipelines.test_resume import EPOCHS, best_weights, kill_after_checkpoint, run_cli, settings

    uri = empty_tracking_store(tmp_path / "mlflow.db")
    ddp = ["--devices", "2", "--strategy", "ddp", "--accelerator", "cpu", "--tracking-uri", uri, "--json"]
    env = {"PL_DISABLE_FORK": "1"}
    crash = ["--experiment", "crash", "--register", "ddp"]
    run_id = kill_after_checkpoint(tmp_path, uri, 2, *settings(), *ddp, *crash, env=env)
    resumed = run_cli(tmp_path, "--resume", run_id, "--tracking-uri", uri, "--json", env=env)
    fresh = run_cli(tmp_path, *settings(), *ddp, "--experiment", "fresh", env=env)

    client = mlflow.MlflowClient(uri)
    run = client.get_run(run_id)
    assert resumed["run_id"] == run_id and run.info.status == "FINISHED"
    assert run.data.params["train.devices"] == "2" and run.data.params["train.strategy"] == "ddp"
    history = {m.step: m.value for m in client.get_metric_history(run_id, "val_loss")}
    reference = {m.step: m.value for m in client.get_metric_history(fresh["run_id"], "val_loss")}
    assert sorted(history) == list(range(EPOCHS)) and history == pytest.approx(reference, rel=1e-5)
    assert len(client.get_metric_history(run_id, "val_loss")) == EPOCHS  # one point per epoch, not per rank
    experiment = client.get_experiment_by_name("crash")
    assert [r.info.run_id for r in client.search_runs([experiment.experiment_id], "tags.role = 'model'")] == [
        run_id
    ]
    assert [str(v.version) for v in client.search_model_versions("name = 'ddp'")] == ["1"]
    mine, theirs = best_weights(client, run_id, tmp_path), best_weights(client, fresh["run_id"], tmp_path)
    assert all(torch.allclose(mine[k], theirs[k], rtol=1e-4, atol=1e-6) for k in theirs)
