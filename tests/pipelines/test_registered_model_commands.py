"""What a user reads after `train --register`, `evaluate` of an alias and `predict`."""

from __future__ import annotations

import csv

import pytest

from tests.pipelines.helpers import forecast, predict_csv, tiny_settings

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast


def test_register_evaluate_and_predict_say_what_the_user_needs(tracking_uri, tmp_path):
    trained = forecast(
        "train", *tiny_settings(), "--register", "demo-forecaster", "--quiet", "--tracking-uri", tracking_uri
    )
    assert trained.exit_code == 0, trained.output
    assert "already exists" not in trained.output  # a brand-new name: no "Creating a new version"
    assert "Successfully registered" not in trained.output
    assert "registered demo-forecaster v1" in trained.stdout
    run_id = trained.stdout.split("run ", 1)[1].split()[0]

    evaluated = forecast(
        "evaluate", "--model-uri", "models:/demo-forecaster@champion", "--tracking-uri", tracking_uri
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert f"models:/demo-forecaster@champion -> version 1 (run {run_id[:8]})" in evaluated.stdout

    out = tmp_path / "next.csv"
    predict_csv("models:/demo-forecaster@champion", tracking_uri, out)
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert list(rows[0]) == ["Date", "Temp_forecast", "Temp_q0.1", "Temp_q0.9", "model_version"]
    assert {row["model_version"] for row in rows} == {"demo-forecaster/1"}  # which version made it
    for row in rows:
        low, mid, high = (float(row[c]) for c in ("Temp_q0.1", "Temp_forecast", "Temp_q0.9"))
        assert low < mid < high  # the 80% interval around the forecast
        for column in ("Temp_forecast", "Temp_q0.1", "Temp_q0.9"):
            digits = row[column].lstrip("-").replace(".", "").lstrip("0")
            assert len(digits) <= 6, row[column]  # 6 significant digits, not 15
