"""`forecast train --resume RUN_ID`: continue a killed run, the same MLflow run, from the last
checkpoint it logged. The run's own config.yaml decides everything, so the resumed half trains
exactly what the first half did; its checkpoints are artifacts, so another machine can resume."""

from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import mlflow
from mlflow.entities import Run, RunTag
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repo import ArtifactRepository
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

from forecaster.checkpoints import BEST, LAST, Publish
from forecaster.config import with_attention_layout_of_its_time
from forecaster.errors import ForecasterError
from pipelines.config import RunConfig, read_yaml, validate
from pipelines.locks import LEASE_S, LockHeld, run_lock, uses_tag_lease
from pipelines.stale import HEARTBEAT_TAG, HOST_TAG, PID_START_TAG, PID_TAG, process_start, stale_reason

CHECKPOINTS = "checkpoints"  # artifact folder: checkpoints/epoch-NNNN/{last,best}.ckpt
SINCE_TAG = "forecast.since"  # when the process training the run took it (UTC)
EPOCHS_TAG = "checkpoint.epochs"  # epochs done in the checkpoint `checkpoint.last` names
# the artifact path of the newest complete file of each kind, set only once its upload returned:
# an upload cut short by a kill is never named, so a resume never reads a torn checkpoint
POINTER_TAGS = {LAST: "checkpoint.last", BEST: "checkpoint.best"}


class ResumeError(ForecasterError):
    """The run cannot be resumed."""


def find_run(client: mlflow.MlflowClient, run_id: str) -> Run:
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ResumeError(f"--resume {run_id}: no such run in this tracking store") from None
    if run.data.tags.get("role") != "model":
        raise ResumeError(
            f"--resume {run_id}: only a model run can be resumed, not a {run.data.tags.get('role')} run"
        )
    return run


def run_config_of(run_id: str, tracking_uri: str) -> RunConfig:
    """The config the run was started with (its config.yaml artifact), validated as at the start."""
    client = mlflow.MlflowClient(tracking_uri)
    find_run(client, run_id)
    with tempfile.TemporaryDirectory(prefix="forecast-resume-") as directory:
        try:
            path = client.download_artifacts(run_id, "config.yaml", directory)
        except (MlflowException, OSError):
            raise ResumeError(f"--resume {run_id}: the run logged no config.yaml") from None
        # a run started before the `steps` attention layout existed built its network with the earlier one
        started = with_attention_layout_of_its_time(read_yaml(path))
        return validate(started, source=f"config.yaml of run {run_id}")


def check_resumable(client: mlflow.MlflowClient, run_id: str) -> Run:
    """Finished runs are done; a RUNNING one only if its process is gone (or silent too long)."""
    run = find_run(client, run_id)
    status = run.info.status
    if status == "FINISHED":
        raise ResumeError(f"--resume {run_id}: the run finished; nothing to resume (train a new one)")
    if status == "RUNNING" and stale_reason(run) is None:
        tags = run.data.tags
        raise ResumeError(
            f"--resume {run_id}: the run is still running (pid {tags.get(PID_TAG, '?')} on "
            f"{tags.get(HOST_TAG, '?')}); if it is dead, `forecast runs --stale --mark-killed` first"
        )
    return run


def download_checkpoints(client: mlflow.MlflowClient, run_id: str, directory: Path) -> bool:
    """The files ``checkpoint.last`` and ``checkpoint.best`` name, as last.ckpt and best.ckpt in
    ``directory``; False when the run logged none yet (killed in its first epoch): it then trains
    from the start, in the same run."""
    tags = client.get_run(run_id).data.tags
    for name, tag in POINTER_TAGS.items():
        if tag in tags:
            local = client.download_artifacts(run_id, tags[tag], str(directory))
            Path(local).replace(directory / name)
    return (directory / LAST).exists()


@contextmanager
def checkpoint_directory(run_id: str | None, tracking_uri: str) -> Iterator[tuple[Path, bool]]:
    """A local directory for this process's checkpoints, holding the run's logged ones when
    resuming; yields it and whether there is a checkpoint to resume from."""
    with tempfile.TemporaryDirectory(prefix="forecaster-ckpt-") as directory:
        path = Path(directory)
        found = run_id is not None and download_checkpoints(mlflow.MlflowClient(tracking_uri), run_id, path)
        yield path, found


def publisher(run_id: str, tracking_uri: str) -> Publish:
    """Log each checkpoint as soon as it is on disk, under a new path per epoch, then point the
    run's tag at it and delete the one it replaces: an artifact store has no atomic rename, so the
    tag is the commit. After last.ckpt, tag how many epochs it holds and when (the heartbeat
    `forecast runs --stale` reads). Only the newest last.ckpt and best.ckpt are kept."""
    client = mlflow.MlflowClient(tracking_uri)
    store = get_artifact_repository(client.get_run(run_id).info.artifact_uri)

    def publish(path: Path, epochs_done: int) -> None:
        folder = f"{CHECKPOINTS}/epoch-{epochs_done:04d}"
        client.log_artifact(run_id, str(path), folder)
        tag = POINTER_TAGS[path.name]
        tags = {tag: f"{folder}/{path.name}"}
        if path.name == LAST:
            tags |= {EPOCHS_TAG: str(epochs_done), HEARTBEAT_TAG: f"{time.time():.0f}"}
        client.log_batch(run_id, tags=[RunTag(key, value) for key, value in tags.items()])
        for superseded in superseded_checkpoints(client, run_id, path.name, keep=tags[tag]):
            prune(client, store, run_id, superseded)

    return publish


def superseded_checkpoints(client: mlflow.MlflowClient, run_id: str, name: str, keep: str) -> list[str]:
    """Every logged ``name`` (last.ckpt or best.ckpt) but the one its tag now names. Listed rather
    than taken from the tag it replaced: a process killed between retagging and deleting leaves
    the old file behind, and the run that resumes it deletes that file with its own next one."""
    folders = [entry.path for entry in client.list_artifacts(run_id, CHECKPOINTS) if entry.is_dir]
    return [
        entry.path
        for folder in folders
        for entry in client.list_artifacts(run_id, folder)
        if entry.path.rpartition("/")[2] == name and entry.path != keep
    ]


def prune(client: mlflow.MlflowClient, store: ArtifactRepository, run_id: str, artifact_path: str) -> None:
    """Delete a superseded checkpoint, and its epoch folder once empty (a local store keeps empty
    folders); a store that cannot delete keeps them: pruning never fails a training."""
    folder = artifact_path.rpartition("/")[0]
    try:
        store.delete_artifacts(artifact_path)
        if not client.list_artifacts(run_id, folder):
            store.delete_artifacts(folder)
    except Exception as error:  # noqa: BLE001 - NotImplementedError, HTTP or S3 errors alike
        warnings.warn(f"could not delete the superseded checkpoint {artifact_path}: {error}", stacklevel=2)


def resuming_line(run: Run, epochs: int) -> str:
    """What ``--resume`` says before it trains: the run and where its last checkpoint leaves it."""
    done = run.data.tags.get(EPOCHS_TAG)  # set with checkpoint.last, once its upload returned
    where = (
        f"from epoch {done} of {epochs} (its last checkpoint)"
        if done is not None
        else f"from the start, epoch 0 of {epochs}: it was stopped before its first checkpoint"
    )
    return f"resuming run {run.info.run_id} ({run.info.run_name}) {where}"


def process_tags() -> dict[str, str]:
    """Who trains the run, so a run left RUNNING by a dead process can be told from a live one."""
    now = time.time()
    tags = {
        HOST_TAG: socket.gethostname(),
        PID_TAG: str(os.getpid()),
        HEARTBEAT_TAG: f"{now:.0f}",
        SINCE_TAG: datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    started = process_start(os.getpid())
    return tags | ({PID_START_TAG: started} if started else {})


def logged_steps(client: mlflow.MlflowClient, run: Run) -> dict[str, set[int]]:
    """Metric steps the run already holds: a resumed epoch that the killed process had logged
    (it died before that epoch's checkpoint) is not logged twice."""
    return {
        key: {m.step for m in client.get_metric_history(run.info.run_id, key)} for key in run.data.metrics
    }


def hold_run(
    stack: ExitStack, client: mlflow.MlflowClient, run_id: str, tracking_uri: str, resume: bool
) -> None:
    """This process alone trains ``run_id`` until ``stack`` closes (pipelines/locks.py); a second
    ``--resume`` of it meanwhile is refused, naming the process that holds it."""
    try:
        wait_s = LEASE_S + 5 if uses_tag_lease(tracking_uri) else 0.0  # a dead holder's lease ages out
        stack.enter_context(run_lock(run_id, tracking_uri, wait_s))
    except LockHeld as exc:
        if not resume:
            raise
        tags = client.get_run(run_id).data.tags
        since = tags.get(SINCE_TAG, "?")
        raise ResumeError(
            f"--resume {run_id}: another process is training this run: pid {tags.get(PID_TAG, '?')} on "
            f"{tags.get(HOST_TAG, '?')}, since {since} ({exc})"
        ) from None
