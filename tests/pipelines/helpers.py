from __future__ import annotations

import json

from typer.testing import CliRunner

from pipelines.cli import app
from tests.conftest import TINY

runner = CliRunner()


def forecast(*args: str):
    """Run the `forecast` CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def tiny_settings(*extra: str) -> list[str]:
    settings = []
    for assignment in [*TINY, *extra]:
        settings += ["--set", assignment]
    return settings


def train_json(tracking_uri: str, *extra: str, register: str | None = None) -> dict:
    args = ["train", *tiny_settings(*extra), "--tracking-uri", tracking_uri, "--json"]
    if register:
        args += ["--register", register]
    result = forecast(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def predict_csv(model_uri: str, tracking_uri: str, out) -> None:
    """`forecast predict` of ``model_uri`` on the bundled Melbourne series into ``out``."""
    result = forecast(
        "predict",
        "--model-uri",
        model_uri,
        "--data",
        "melbourne-temp",
        "--output",
        out,
        "--tracking-uri",
        tracking_uri,
    )
    assert result.exit_code == 0, result.output
