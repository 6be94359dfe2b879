"""--json documents are strict JSON: a flat series' MASE (NaN) or an infinite skill is null, never
Python's ``NaN``/``Infinity``, which ``jq`` and every other strict parser refuse."""

from __future__ import annotations

import json
from types import SimpleNamespace

from pipelines.cli import report_training
from pipelines.console import human_output_on_stderr


def strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_train_json_with_a_nan_metric_is_strict_json(capsys):
    metrics = {"model": {"mae": 1.0, "mase": float("nan")}, "naive": {"mae": 2.0, "mase": float("inf")}}
    document = {"run_id": "abc", "metrics": metrics, "per_series": {"flat": [float("nan")]}}
    outcome = SimpleNamespace(
        run_name="r",
        test_windows=3,
        metrics=metrics,
        per_series=None,
        intervals={},
        run_id="abc",
        model_uri="models:/m-1",
        seconds=1.0,
        epochs=1,
        registered_name=None,
        as_json=lambda: document,
    )
    with human_output_on_stderr():  # as `forecast train --json` runs it: the tables on stderr
        report_training(outcome, "champion", as_json=True)
    parsed = strict(capsys.readouterr().out)
    assert parsed["metrics"]["model"] == {"mae": 1.0, "mase": None}
    assert parsed["metrics"]["naive"]["mase"] is None and parsed["per_series"] == {"flat": [None]}
