"""How a run's checkpoints are published as artifacts (pipelines/resume.py's publisher): the tag
names the newest file of each kind and no older file of that kind stays behind, including one a
killed process left between retagging and deleting."""

from __future__ import annotations

from pathlib import Path

import mlflow

from pipelines.resume import POINTER_TAGS, publisher
from tests.conftest import empty_tracking_store


def logged_checkpoints(client: mlflow.MlflowClient, run_id: str) -> set[str]:
    return {
        entry.path
        for folder in client.list_artifacts(run_id, "checkpoints")
        for entry in client.list_artifacts(run_id, folder.path)
    }


def test_publishing_keeps_only_the_newest_of_each_kind_even_after_a_kill(tmp_path: Path):
    tracking_uri = empty_tracking_store(tmp_path / "mlflow.db")
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.create_experiment("ckpt", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    for name in ("last.ckpt", "best.ckpt"):
        (tmp_path / name).write_bytes(b"weights")
    # what a process killed between retagging epoch 2 and deleting epoch 1 leaves
    client.log_artifact(run_id, str(tmp_path / "last.ckpt"), "checkpoints/epoch-0001")
    client.log_artifact(run_id, str(tmp_path / "last.ckpt"), "checkpoints/epoch-0002")
    client.log_artifact(run_id, str(tmp_path / "best.ckpt"), "checkpoints/epoch-0001")
    client.set_tag(run_id, POINTER_TAGS["last.ckpt"], "checkpoints/epoch-0002/last.ckpt")
    client.set_tag(run_id, POINTER_TAGS["best.ckpt"], "checkpoints/epoch-0001/best.ckpt")

    publish = publisher(run_id, tracking_uri)  # the resumed process
    publish(tmp_path / "last.ckpt", 3)

    tags = client.get_run(run_id).data.tags
    assert tags["checkpoint.last"] == "checkpoints/epoch-0003/last.ckpt"
    assert tags["checkpoint.epochs"] == "3"
    assert logged_checkpoints(client, run_id) == {
        "checkpoints/epoch-0003/last.ckpt",
        "checkpoints/epoch-0001/best.ckpt",
    }
    publish(tmp_path / "best.ckpt", 3)
    assert logged_checkpoints(client, run_id) == {
        "checkpoints/epoch-0003/last.ckpt",
        "checkpoints/epoch-0003/best.ckpt",
    }
    # emptied epoch folders go too: a local store would otherwise keep them
    assert [e.path for e in client.list_artifacts(run_id, "checkpoints")] == ["checkpoints/epoch-0003"]
