"""No decision reads the test split: early stopping, the checkpoint, conformal calibration, the
promotion gate and `compare`'s order come out the same when the test rows are changed; the gate
compares on the selection window, says which one and with which figures, refuses a holder fitted on
it, and two promotions at once cannot let the worse candidate win."""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

import pipelines.registry as registry
from forecaster.data.datamodule import prepare_series
from forecaster.data.datasets import get_dataset
from forecaster.data.source import load_from_config
from forecaster.data.splitting import selection_splits
from forecaster.evaluation import evaluate
from pipelines.compare import compare_runs
from pipelines.config import load_run_config
from pipelines.locks import LockHeld
from pipelines.registry import load_predictor, promote, register_run
from tests.conftest import empty_tracking_store
from tests.pipelines.helpers import forecast, train_json

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast

GOOD = ("train.epochs=3",)
BAD = ("train.epochs=1", "train.learning_rate=1e-9", "model.level_norm=none", "train.seed=7")


def csv_with_changed_test_rows(tmp_path) -> str:
    """Melbourne temperatures with every test row's target tripled plus noise."""
    frame = pd.read_csv(get_dataset("melbourne-temp").path)
    config = load_run_config(None, ["data.dataset=melbourne-temp"]).forecast_config()
    prepared = prepare_series(load_from_config(config.data), config)
    first_test = prepared.series.frame.index[prepared.borders.rows("test")[0]]
    dates = pd.to_datetime(frame["Date"])
    test_rows = dates >= first_test
    noise = np.random.default_rng(0).normal(0, 5, test_rows.sum())
    frame.loc[test_rows, "Temp"] = frame.loc[test_rows, "Temp"] * 3 + noise
    path = tmp_path / "changed-test.csv"
    frame.to_csv(path, index=False)
    return str(path)


def everything_decided(tracking_uri: str, data: tuple[str, ...]) -> dict:
    """Train a good and a bad model into ``tracking_uri`` (registered as "pick", the demo's way)
    and collect every decision: epochs, checkpoint weights, conformal widths, who holds
    @champion, compare's order (and the two runs, for the tests that reuse them)."""
    mlflow.set_tracking_uri(tracking_uri)
    good = train_json(tracking_uri, *GOOD, *data, register="pick")
    bad = train_json(tracking_uri, *BAD, *data, register="pick")
    champion = mlflow.MlflowClient(tracking_uri).get_model_version_by_alias("pick", "champion")
    predictor = load_predictor("models:/pick/1")
    view = compare_runs("forecasting")
    order = view["run id"].tolist()
    # compare names the version holding @champion beside its run (and only there)
    holder = view.loc[view["run id"] == champion.run_id[:8], "version"].item()
    assert holder == f"pick v{champion.version} @champion"
    assert view["version"].str.contains("@champion").sum() == 1
    return {
        "selection": (good["selection_metrics"]["model"]["mae"], bad["selection_metrics"]["model"]["mae"]),
        "test": (good["metrics"]["model"]["mae"], bad["metrics"]["model"]["mae"]),
        "promoted": (good["promoted"], bad["promoted"]),
        "champion": (str(champion.version), champion.run_id == good["run_id"]),
        "weights": {k: v.clone() for k, v in predictor.network.state_dict().items()},
        "conformal": {level: width.copy() for level, width in predictor.conformal.items()},
        "volatility_floor": predictor.volatility_floor,
        "order": [order.index(good["run_id"][:8]), order.index(bad["run_id"][:8])],
        "runs": (good, bad),
    }


@dataclass(frozen=True)
class Decided:
    """The module's one store of a good and a bad model (``everything_decided`` on the original
    data, taken as they were trained), where the other tests register those runs again instead
    of training their own: each training costs seconds of CPU."""

    uri: str
    directory: Path  # the store's working directory: its runs' artifacts are under it
    decisions: dict
    good: dict  # `forecast train --json` of each
    bad: dict


@pytest.fixture(scope="module")
def decided(tmp_path_factory) -> Decided:
    """Trained once per module: the decisions are taken before any test adds to the store."""
    directory = tmp_path_factory.mktemp("decided")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        uri = empty_tracking_store(directory / "mlflow.db")
        decisions = everything_decided(uri, ())
    return Decided(uri, directory, decisions, *decisions["runs"])


@pytest.fixture
def in_decided(decided, monkeypatch) -> Decided:
    """The shared store, as the current one, from its own working directory."""
    monkeypatch.chdir(decided.directory)
    mlflow.set_tracking_uri(decided.uri)
    return decided


def test_changing_the_test_rows_changes_no_decision(decided, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = decided.decisions
    changed_csv = csv_with_changed_test_rows(tmp_path)
    changed_uri = empty_tracking_store(tmp_path / "b" / "mlflow.db")
    changed = everything_decided(changed_uri, (f"data.path={changed_csv}",))

    assert changed["test"][0] != pytest.approx(original["test"][0], rel=0.05)  # the change reached test
    assert changed["selection"] == original["selection"]
    assert changed["promoted"] == original["promoted"] == (True, False)
    assert changed["champion"] == original["champion"]
    assert changed["order"] == original["order"] == [0, 1]
    assert changed["conformal"].keys() == original["conformal"].keys()
    for level, width in original["conformal"].items():
        np.testing.assert_array_equal(changed["conformal"][level], width)
    assert changed["volatility_floor"] == original["volatility_floor"] is not None
    for name, tensor in original["weights"].items():
        assert torch.equal(changed["weights"][name], tensor), name


def test_the_gate_names_the_selection_window_and_its_figures(in_decided):
    """The bad model (pick v2) was refused as it registered; asked again, the gate says why."""
    good, bad = in_decided.good, in_decided.bad
    assert bad["registered_version"] == "2"
    refused = forecast(
        "promote", "--name", "pick", "--version", bad["registered_version"], "--tracking-uri", in_decided.uri
    )
    assert refused.exit_code == 1
    line = " ".join(refused.stdout.split())
    assert "selection window" in line and "not lower" in line and "test split decides nothing" in line
    assert f"{bad['selection_metrics']['model']['mae']:.4f}" in line
    assert f"{good['selection_metrics']['model']['mae']:.4f}" in line


def test_a_holder_fitted_on_the_selection_window_is_not_compared_there(in_decided):
    # the holder trained on a later split: its validation rows cover the candidate's selection rows
    uri = in_decided.uri
    train_json(uri, *GOOD, "split.train=0.8", "split.val=0.1", "split.test=0.1", register="late")
    # the candidate: the shared good model, trained on the default split (`forecast register`
    # promotes as `train --register` does)
    registered = forecast(
        "register", "--run-id", in_decided.good["run_id"], "--name", "late", "--tracking-uri", uri
    )
    assert registered.exit_code == 0, registered.output
    assert "registered late v2; @champion kept" in " ".join(registered.stdout.split())
    mlflow.set_tracking_uri(uri)
    decision = promote("late", "2")
    assert not decision.promoted
    assert (
        "fitted or early-stopped on data up to" in decision.reason and "selection window" in decision.reason
    )


def test_two_promotions_at_once_cannot_let_the_worse_one_win(in_decided, monkeypatch):
    uri = in_decided.uri
    mlflow.set_tracking_uri(uri)
    # the shared runs, registered again (no promotion): the bad one as v1, the good one as v2
    assert register_run(in_decided.bad["run_id"], "race") == "1"
    assert register_run(in_decided.good["run_id"], "race") == "2"
    first = {**in_decided.good, "registered_version": "2"}
    second = train_json(uri, "train.epochs=2", "train.seed=5", register="race")
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient()
    client.set_registered_model_alias("race", "champion", "1")  # both candidates now face v1
    scores = {v["registered_version"]: v["selection_metrics"]["model"]["mae"] for v in (first, second)}
    worse, better = sorted(scores, key=scores.get, reverse=True)
    assert scores[worse] > scores[better]

    # The worse one asks first, and its comparison goes on until the better one has either ended
    # its promotion (nothing made it wait: it compared with v1 too, and the worse one's alias would
    # come last) or been found waiting for the worse one's lock. Events, not sleeps: a sleep long
    # enough on an idle machine is too short on a loaded one.
    evaluating, better_went_on = threading.Event(), threading.Event()
    evaluate, lock = registry.evaluate_selection, registry.promotion_lock

    def held_up_for_the_worse(*args, **kwargs):
        if threading.current_thread().name == "worse":
            evaluating.set()
            better_went_on.wait(60)
        return evaluate(*args, **kwargs)

    @contextlib.contextmanager
    def lock_seen_by_the_test(name, *args, **kwargs):
        if threading.current_thread().name == "better":
            try:
                with lock(name, wait_s=0):
                    pass  # free while the worse one compares: it goes on, unserialised
            except LockHeld:
                better_went_on.set()  # it waits for the worse one's promotion to end
        with lock(name, *args, **kwargs) as kind:
            yield kind

    def promote_as(v: str) -> None:
        try:
            decisions[v] = promote("race", v, allow_worse_than_naive=True)  # tiny: worse than naive
        finally:
            if v == better:
                better_went_on.set()

    monkeypatch.setattr(registry, "evaluate_selection", held_up_for_the_worse)
    monkeypatch.setattr(registry, "promotion_lock", lock_seen_by_the_test)
    decisions = {}
    threads = [
        threading.Thread(target=promote_as, args=(v,), name=name)
        for name, v in (("worse", worse), ("better", better))
    ]
    threads[0].start()
    assert evaluating.wait(60), "the worse one's promotion never compared"
    threads[1].start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert str(client.get_model_version_by_alias("race", "champion").version) == better
    assert decisions[better].promoted
    assert "promotion.lock" not in client.get_registered_model("race").tags


def test_with_three_selection_folds_the_selection_score_is_their_mean(tracking_uri):
    folds = ("split.selection=0.3", "split.selection_folds=3")  # 3 x 0.3 of validation, before test
    run = train_json(tracking_uri, *folds)
    client = mlflow.MlflowClient(tracking_uri)
    logged = client.get_run(run["run_id"]).data.metrics
    by_fold = {
        name: [m.value for m in sorted(client.get_metric_history(run["run_id"], name), key=lambda m: m.step)]
        for name in ("selection_mae_by_fold", "naive_selection_mae_by_fold")
    }
    assert len(by_fold["selection_mae_by_fold"]) == 3
    assert logged["selection_mae"] == pytest.approx(np.mean(by_fold["selection_mae_by_fold"]))
    assert logged["naive_selection_mae"] == pytest.approx(np.mean(by_fold["naive_selection_mae_by_fold"]))
    assert run["selection_metrics"]["model"]["mae"] == pytest.approx(logged["selection_mae"])
    # each fold's figure is the logged model's MAE on that fold, fold 1 being the selection period
    mlflow.set_tracking_uri(tracking_uri)
    predictor = load_predictor(run["model_uri"])
    config = load_run_config(None, ["data.dataset=melbourne-temp", *folds]).forecast_config()
    prepared = registry.prepared_for(config, predictor)
    again = [evaluate(predictor, prepared, split).metrics["model"]["mae"] for split in selection_splits(3)]
    assert again == pytest.approx(by_fold["selection_mae_by_fold"], rel=1e-5)
    assert prepared.borders.rows(selection_splits(3)[-1])[0] >= prepared.borders.train_end
    assert logged["selection_mae"] != pytest.approx(again[0])  # not the selection period alone


def test_compare_says_when_runs_were_scored_on_different_folds(tracking_uri):
    """A run scored by one fold (k = 1, as every run before the default became 2) beside one scored
    by two: compare shows k and says the order is not like for like; with one rule it stays quiet."""
    one = train_json(tracking_uri, "split.selection_folds=1")
    two = train_json(tracking_uri)  # the default: the two halves of validation
    listed = forecast("compare", "--tracking-uri", tracking_uri, "--json")
    assert listed.exit_code == 0, listed.output
    folds = {row["run_id"]: row["selection_folds"] for row in json.loads(listed.stdout)["runs"]}
    assert folds == {one["run_id"]: 1, two["run_id"]: 2}
    shown = " ".join(forecast("compare", "--tracking-uri", tracking_uri).stdout.split())
    assert "which differ (1, 2): not like for like" in shown
    mlflow.MlflowClient(tracking_uri).delete_run(one["run_id"])
    alone = " ".join(forecast("compare", "--tracking-uri", tracking_uri).stdout.split())
    assert "which differ" not in alone
