"""No alias for a model worse than naive: `train --register`, `register` and `promote` register it
but refuse it the alias, naming the figures and --allow-worse-than-naive, which gives it anyway."""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow.exceptions import MlflowException

from tests.conftest import NAIVE_GATE_OFF, TINY
from tests.pipelines.helpers import forecast

pytestmark = pytest.mark.slow  # trains a real model: in make test, not make test-fast

# an untrained network (learning rate ~0, no level normalisation): far worse than naive
UNTRAINED = ["train.epochs=1", "train.learning_rate=1e-9", "model.level_norm=none", "train.seed=7"]
FLAG = "--allow-worse-than-naive"


def gated_settings() -> list[str]:
    """TINY with the naive bar in force (conftest waives it for every other test)."""
    return [part for item in [*TINY, *UNTRAINED] if item != NAIVE_GATE_OFF for part in ("--set", item)]


def holder(tracking_uri: str, name: str) -> str | None:
    try:
        return str(mlflow.MlflowClient(tracking_uri).get_model_version_by_alias(name, "champion").version)
    except MlflowException:
        return None


def test_a_model_worse_than_naive_is_registered_but_gets_no_alias_without_the_flag(tracking_uri):
    trained = forecast(
        "train", *gated_settings(), "--register", "gated", "--json", "--tracking-uri", tracking_uri
    )
    assert trained.exit_code == 0, trained.output
    outcome = json.loads(trained.stdout.strip().splitlines()[-1])
    model, naive = (outcome["selection_metrics"][name]["mae"] for name in ("model", "naive"))
    assert model > naive
    assert outcome["registered_version"] == "1" and outcome["promoted"] is False
    assert holder(tracking_uri, "gated") is None  # the alias had no holder, and still has none
    line = " ".join(trained.stderr.split())  # with --json, the human lines are on stderr
    assert "registered gated v1; did not take @champion" in line
    assert f"{model:.4f}" in line and f"{naive:.4f}" in line and "not below the naive" in line
    assert FLAG in line

    refused = forecast("promote", "--name", "gated", "--version", "1", "--tracking-uri", tracking_uri)
    assert refused.exit_code == 1
    assert "@champion kept" in refused.stdout and FLAG in refused.stdout
    assert holder(tracking_uri, "gated") is None

    also = forecast(
        "register", "--run-id", outcome["run_id"], "--name", "other", "--tracking-uri", tracking_uri
    )
    assert also.exit_code == 0, also.output
    assert "registered other v1; @champion kept" in also.stdout and FLAG in also.stdout
    assert holder(tracking_uri, "other") is None

    allowed = forecast("promote", "--name", "gated", "--version", "1", FLAG, "--tracking-uri", tracking_uri)
    assert allowed.exit_code == 0, allowed.output
    assert "@champion moved" in allowed.stdout and "not below naive, allowed" in allowed.stdout
    assert holder(tracking_uri, "gated") == "1"


def test_train_with_the_flag_gives_the_alias_to_a_model_worse_than_naive(tracking_uri):
    trained = forecast(
        "train", *gated_settings(), "--register", "waived", FLAG, "--json", "--tracking-uri", tracking_uri
    )
    assert trained.exit_code == 0, trained.output
    outcome = json.loads(trained.stdout.strip().splitlines()[-1])
    assert outcome["selection_metrics"]["model"]["mae"] > outcome["selection_metrics"]["naive"]["mae"]
    assert outcome["promoted"] is True and holder(tracking_uri, "waived") == "1"
