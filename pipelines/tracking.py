"""Where runs go: the tracking URI, experiments with a local artifact folder, reachability, tags."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mlflow

from forecaster.errors import ForecasterError
from infra.database_urls import missing_sqlite_store

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_ARTIFACT_DIR = "mlartifacts"


class TrackingError(ForecasterError):
    """The tracking server or store cannot be used."""


def resolve_tracking_uri(explicit: str | None = None) -> str:
    """--tracking-uri, else MLFLOW_TRACKING_URI, else a SQLite store in the working directory."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def connect(tracking_uri: str, existing: bool = False) -> str:
    """Point MLflow at ``tracking_uri`` after checking a remote server answers (MLflow's own
    client would retry for minutes before failing). ``existing``: the command only reads what the
    store holds, so a local SQLite store whose file is missing is refused (``check_store_exists``)."""
    if existing:
        check_store_exists(tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        health = tracking_uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(health, timeout=5) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            raise TrackingError(
                f"cannot reach the MLflow tracking server at {tracking_uri} ({exc}); start it or "
                "set MLFLOW_TRACKING_URI to a reachable server"
            ) from None
    mlflow.set_tracking_uri(tracking_uri)
    return tracking_uri


def check_store_exists(tracking_uri: str) -> None:
    """A mistyped SQLite path would otherwise be created as an empty store by the first MLflow
    call, and the command would then say "experiment not found" or "model not found" about it,
    leaving the file behind."""
    path = missing_sqlite_store(tracking_uri)
    if path is not None:
        raise TrackingError(
            f"the tracking store {path} does not exist (nothing was trained into it): check "
            "--tracking-uri or MLFLOW_TRACKING_URI"
        )


def reads_the_store(model_uri: str) -> bool:
    """Whether a model URI is found through the tracking store (the registry or a run), not a
    local folder."""
    return model_uri.startswith(("models:/", "runs:/"))


# Marks experiments as model training, not GenAI. MLflow 3.17.2's UI ignores it when choosing a
# view (its global GenAI / Model training switch decides, GenAI by default); older UIs honour it.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def ensure_experiment(name: str, tracking_uri: str) -> str:
    """Experiment id; a local SQLite store keeps artifacts in ./mlartifacts, a server decides itself.
    The experiment is marked as model training (``mlflow.experimentKind``), older ones too."""
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = None
        if tracking_uri.startswith("sqlite:"):
            location = (Path.cwd() / DEFAULT_ARTIFACT_DIR).resolve().as_uri()
        return client.create_experiment(
            name, artifact_location=location, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
        )
    if EXPERIMENT_KIND_TAG not in experiment.tags:
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return experiment.experiment_id


def environment_tags() -> dict[str, str]:
    """Git commit and package versions, so a run can be reproduced."""
    tags = {}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        if commit.returncode == 0:
            tags["mlflow.source.git.commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    for package in ("torch", "pytorch-lightning", "mlflow", "pandas", "numpy", "rnn-forecaster"):
        try:
            tags[f"version.{package}"] = version(package)
        except PackageNotFoundError:
            continue
    return tags


def is_rank_zero() -> bool:
    """True in the process that owns the MLflow run (DDP children carry RANK/LOCAL_RANK > 0)."""
    ranks = (os.environ.get(k, "0") for k in ("RANK", "LOCAL_RANK", "NODE_RANK"))
    return all(r == "0" for r in ranks)
