"""`forecast train --resume RUN_ID`: continue a killed run, the same MLflow run, from the last
checkpoint it logged. The run's own config.yaml decides everything, so the resumed half trains
exactly what the first half did; its checkpoints are artifacts, so another machine can resume."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
from mlflow.entities import Run
from mlflow.exceptions import MlflowException

from forecaster.checkpoints import BEST, LAST, Publish
from forecaster.errors import ForecasterError
from pipelines.config import RunConfig, read_yaml, validate
from pipelines.stale import HEARTBEAT_TAG, HOST_TAG, PID_TAG, stale_reason

CHECKPOINTS = "checkpoints"  # artifact folder: checkpoints/last.ckpt, checkpoints/best.ckpt
EPOCHS_TAG = "checkpoint.epochs"  # epochs done in checkpoints/last.ckpt


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
        return validate(read_yaml(path), source=f"config.yaml of run {run_id}")


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
    """last.ckpt and best.ckpt into ``directory``; False when the run logged none yet (killed in
    its first epoch): it then trains from the start, in the same run."""
    names = {Path(a.path).name for a in client.list_artifacts(run_id, CHECKPOINTS)}
    for name in (LAST, BEST):
        if name in names:
            local = client.download_artifacts(run_id, f"{CHECKPOINTS}/{name}", str(directory))
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
    """Log each checkpoint as soon as it is on disk, replacing the previous one; after last.ckpt,
    tag how many epochs it holds and when (the heartbeat `forecast runs --stale` reads)."""
    client = mlflow.MlflowClient(tracking_uri)

    def publish(path: Path, epochs_done: int) -> None:
        client.log_artifact(run_id, str(path), CHECKPOINTS)
        if path.name == LAST:
            client.set_tag(run_id, EPOCHS_TAG, str(epochs_done))
            client.set_tag(run_id, HEARTBEAT_TAG, f"{time.time():.0f}")

    return publish


def process_tags() -> dict[str, str]:
    """Who trains the run, so a run left RUNNING by a dead process can be told from a live one."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), HEARTBEAT_TAG: f"{time.time():.0f}"}


def logged_steps(client: mlflow.MlflowClient, run: Run) -> dict[str, set[int]]:
    """Metric steps the run already holds: a resumed epoch that the killed process had logged
    (it died before that epoch's checkpoint) is not logged twice."""
    return {
        key: {m.step for m in client.get_metric_history(run.info.run_id, key)} for key in run.data.metrics
    }
