"""Run tags that say where a run's model stands in the registry, kept true on every alias move.

A run's ``registered`` tag is the label `forecast compare` shows ("demo-forecaster v2 @champion",
pipelines/compare.registered_as), and ``promoted=True`` is on a run only while one of its versions
holds an alias: tags set once at registration went stale as soon as a later version took the alias,
leaving two runs that both claimed to be promoted."""

from __future__ import annotations

from contextlib import suppress

import mlflow
from mlflow.entities import LifecycleStage
from mlflow.exceptions import MlflowException

from pipelines.compare import registered_as

REGISTERED_TAG = "registered"  # the shared MLflow view's column tags.registered reads this name
PROMOTED_TAG = "promoted"


def retag_versions(name: str, versions: list[str]) -> None:
    """Re-tag the runs of ``name``'s ``versions`` (those logged by a run) from the registry as it is
    now: call it after an alias moved or a version was registered."""
    client = mlflow.MlflowClient()
    runs = {client.get_model_version(name, version).run_id for version in versions}
    for run_id in sorted(run for run in runs if run):
        retag_run(client, run_id)


def retag_run(client: mlflow.MlflowClient, run_id: str) -> None:
    """A deleted run is left as it is: MLflow refuses tags on it (and one removed for good has
    none), and the alias has moved already, so the promotion must not fail over its run's label."""
    try:
        run = client.get_run(run_id)
    except MlflowException:
        return  # deleted for good (`mlflow gc`) while its version stays registered
    if run.info.lifecycle_stage != LifecycleStage.ACTIVE:
        return
    label = registered_as(run_id, {})
    if label is None:
        return
    client.set_tag(run_id, REGISTERED_TAG, label)
    if holds_an_alias(label):
        client.set_tag(run_id, PROMOTED_TAG, "True")
    elif PROMOTED_TAG in run.data.tags:
        with suppress(MlflowException):  # deleted meanwhile by another promotion: as wanted
            client.delete_tag(run_id, PROMOTED_TAG)


def holds_an_alias(label: str) -> bool:
    """Whether a registered_as label ("m v2 @champion, n v1") shows an alias on any version."""
    return " @" in label
