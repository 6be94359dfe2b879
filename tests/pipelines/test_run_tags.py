"""Re-tagging after an alias move skips a run that was deleted: MLflow refuses tags on a deleted
run, and the alias has already moved, so the promotion must not end in an error over it."""

from __future__ import annotations

import mlflow

from pipelines.run_tags import retag_versions


def test_an_alias_leaving_a_deleted_runs_version_retags_the_rest(tracking_uri):
    client = mlflow.MlflowClient(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    experiment = client.create_experiment("tags")
    old, new, gone = (client.create_run(experiment).info.run_id for _ in range(3))
    client.create_registered_model("m")
    for run_id in (old, new, gone):
        client.create_model_version("m", "file:///nowhere", run_id=run_id)
    client.set_registered_model_alias("m", "champion", "1")
    retag_versions("m", ["1"])
    client.delete_run(old)  # the holder's run is deleted, its version stays registered
    client.set_registered_model_alias("m", "champion", "2")

    retag_versions("m", ["2", "1"])  # raised MlflowException: run must be in the 'active' state

    assert client.get_run(new).data.tags["registered"] == "m v2 @champion"
    assert client.get_run(new).data.tags["promoted"] == "True"
    client.delete_run(gone)
    retag_versions("m", ["3"])
