"""Run tags tell the truth after an alias moves: only the holder's run says promoted=True, and every
registered run's `registered` tag is the label `forecast compare` shows."""

from __future__ import annotations

import mlflow
import pytest

from tests.pipelines.helpers import forecast, train_json

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast

BAD = ("train.epochs=1", "train.learning_rate=1e-9", "model.level_norm=none", "train.seed=7")
GOOD = ("train.epochs=3",)


def tags(tracking_uri: str, run_id: str) -> dict[str, str]:
    return mlflow.MlflowClient(tracking_uri).get_run(run_id).data.tags


def test_the_run_that_loses_the_alias_loses_its_promoted_tag(tracking_uri):
    first = train_json(tracking_uri, *BAD, register="tagged")  # v1 takes the empty alias
    assert tags(tracking_uri, first["run_id"])["registered"] == "tagged v1 @champion"
    assert tags(tracking_uri, first["run_id"])["promoted"] == "True"

    second = train_json(tracking_uri, *GOOD, register="tagged")  # v2 beats v1 on selection
    assert second["promoted"] is True
    loser, winner = tags(tracking_uri, first["run_id"]), tags(tracking_uri, second["run_id"])
    assert winner["registered"] == "tagged v2 @champion" and winner["promoted"] == "True"
    assert loser["registered"] == "tagged v1" and "promoted" not in loser

    forced = forecast(
        "promote", "--name", "tagged", "--version", "1", "--force", "--tracking-uri", tracking_uri
    )
    assert forced.exit_code == 0, forced.output  # back to v1: the tags follow the alias
    loser, winner = tags(tracking_uri, second["run_id"]), tags(tracking_uri, first["run_id"])
    assert winner["registered"] == "tagged v1 @champion" and winner["promoted"] == "True"
    assert loser["registered"] == "tagged v2" and "promoted" not in loser
