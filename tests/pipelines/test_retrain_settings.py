"""`forecast retrain`'s config: the served model's, with the registry settings of a retrain. The
promotion gate's naive bar holds unless this retrain waives it; a waiver the served model was
trained with is not inherited."""

from __future__ import annotations

import pytest

from pipelines.config import read_yaml, validate
from pipelines.retrain import with_settings
from tests.conftest import REPO


@pytest.fixture
def served_config() -> dict:
    settings = read_yaml(str(REPO / "pipelines/configs/quick-lstm.yaml"))
    settings.setdefault("tracking", {})["allow_worse_than_naive"] = True  # the served model's waiver
    return validate(settings, source="quick-lstm.yaml").model_dump(mode="json")  # as a model stores it


def test_a_retrain_keeps_the_naive_bar_unless_it_waives_it(served_config):
    kept = with_settings(dict(served_config), None, None, "drifting", "champion")
    assert kept.tracking.allow_worse_than_naive is False
    assert (kept.tracking.registered_model, kept.tracking.alias) == ("drifting", "champion")
    waived = with_settings(
        dict(served_config), None, None, "drifting", "champion", allow_worse_than_naive=True
    )
    assert waived.tracking.allow_worse_than_naive is True


def test_the_retrain_command_takes_the_waiver():
    from typer.testing import CliRunner

    from pipelines.cli import app

    shown = CliRunner().invoke(app, ["retrain", "--help"], terminal_width=200).output
    assert "--allow-worse-than-naive" in shown
