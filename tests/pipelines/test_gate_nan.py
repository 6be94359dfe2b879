"""A model whose selection MAE is NaN (a diverged network forecasts NaN) is not below naive: the
gate refuses it the alias, even when the name has no holder, instead of reading NaN >= naive as
False and promoting it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pipelines import registry


@pytest.fixture
def gate(monkeypatch):
    """_promote with the model's and naive's selection MAE given, no MLflow behind it."""
    moved: list[str] = []
    config = SimpleNamespace(split=SimpleNamespace(folds=1))
    monkeypatch.setattr(registry, "load_predictor", lambda uri: SimpleNamespace(config=config))
    monkeypatch.setattr(registry, "prepared_for", lambda config, predictor, table=None: None)
    monkeypatch.setattr(registry, "window_words", lambda prepared, split: "selection window")
    client = SimpleNamespace(set_registered_model_alias=lambda name, alias, version: moved.append(version))
    monkeypatch.setattr(registry.mlflow, "MlflowClient", lambda: client)

    def decide(model_mae: float, naive_mae: float, allow: bool = False, force: bool = False):
        scores = {"model": {"mae": model_mae}, "naive": {"mae": naive_mae}}
        monkeypatch.setattr(registry, "evaluate_selection", lambda *args: SimpleNamespace(metrics=scores))
        return registry._promote("m", "1", "champion", None, force, allow), moved

    return decide


def test_a_nan_selection_mae_gets_no_alias(gate):
    decision, moved = gate(math.nan, 1.0)
    assert not decision.promoted and moved == []
    assert "not finite" in decision.reason


@pytest.mark.parametrize(("allow", "force"), [(True, False), (False, True), (True, True)])
def test_no_flag_gives_a_non_finite_model_an_alias(gate, allow, force):
    """--allow-worse-than-naive and --force waive the figures, not a model the service cannot load
    (its warm-up forecast is not finite)."""
    decision, moved = gate(math.nan, 1.0, allow=allow, force=force)
    assert not decision.promoted and moved == []
    assert "whatever the flags" in decision.reason


def test_a_model_below_naive_still_takes_an_empty_alias(gate):
    decision, moved = gate(0.5, 1.0)
    assert decision.promoted and moved == ["1"]
