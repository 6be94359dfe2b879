"""The service with future covariates (series[i].future, checked field by field) and with a panel
model (each window scaled by itself), against real registered tiny models: one app per model for
the module's tests that only send requests (``served``), one of its own for the shadow test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from monitoring.database import open_for_reading
from monitoring.schema import forecasts
from tests.service.conftest import serving, train_registered
from tests.waiting import until

# the module's models are trained once, on one worker
pytestmark = [
    pytest.mark.slow,
]  # serves real trained models: in make test, not make test-fast

LOOKBACK, HORIZON = 14, 4
TINY = [
    f"window.lookback={LOOKBACK}",
    f"window.horizon={HORIZON}",
    "model.hidden_size=8",
    "model.layers=1",
    "train.epochs=1",
    "train.batch_size=128",
    "train.limit_train_batches=3",
    "train.progress_bar=false",
]


def write_data(root: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    days = pd.date_range("2021-01-01", periods=300, freq="D")
    promo = (rng.random(len(days)) < 0.2).astype(float)
    driver = pd.DataFrame({"t": days, "y": 10 + 4 * promo + rng.normal(0, 0.5, len(days)), "promo": promo})
    driver.to_csv(root / "driver.csv", index=False)
    long = pd.concat(
        pd.DataFrame({"id": key, "t": days[k * 20 :], "y": scale * (5 + np.sin(np.arange(300 - k * 20) / 3))})
        for k, (key, scale) in enumerate({"small": 1.0, "large": 500.0}.items())
    )
    long.to_csv(root / "long.csv", index=False)
    return root / "driver.csv", root / "long.csv"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("future-panel-store")
    driver, long = write_data(root)
    common = ["data.time_column=t", "data.target=y", *TINY]
    models = {
        "svc-future": [f"data.path={driver}", "data.future_covariates=[promo]", *common],
        "svc-panel": [f"data.path={long}", "data.id_column=id", "model.level_norm=standard", *common],
        "svc-embedded": [
            f"data.path={long}",
            "data.id_column=id",
            "model.level_norm=standard",
            "model.series_embedding=4",
            *common,
        ],
    }
    return train_registered(root, models)


@pytest.fixture(scope="module")
def served(store) -> Iterator[Callable[[str], TestClient]]:
    """``served(name)``: a ready TestClient serving ``models:/<name>@champion`` from ``store``,
    started on first use and shared by the module's tests after it: they only send requests and
    read the answers (each app start costs a model load and a parser helper process)."""
    with ExitStack() as apps:
        clients: dict[str, TestClient] = {}

        def client(name: str) -> TestClient:
            if name not in clients:
                clients[name] = apps.enter_context(serving(store, f"models:/{name}@champion"))
            return clients[name]

        yield client


def values(seed: int = 0, level: float = 10.0) -> list[float]:
    return (level + np.random.default_rng(seed).normal(0, 1, LOOKBACK)).round(3).tolist()


def test_the_model_description_lists_past_and_future_covariates(served):
    client = served("svc-future")
    info = client.get("/v1/model").json()
    assert info["future_covariates"] == [{"name": "promo", "values": HORIZON}]
    assert info["past_covariates"] == [] and info["panel"] is False
    schema = client.get("/openapi.json").json()["components"]["schemas"]["SeriesIn"]
    assert "future" in schema["required"]
    promo = schema["properties"]["future"]["properties"]["promo"]
    assert promo["minItems"] == promo["maxItems"] == HORIZON
    example = schema and client.get("/openapi.json").json()["components"]["schemas"]["PredictRequest"]
    body = example["examples"][0]
    assert client.post("/v1/predict", json=body).status_code == 200  # the published example works


def test_future_values_reach_the_model_and_match_the_pyfunc(store, served):
    ahead = [[0, 1, 0, 0], [1, 1, 1, 1]]
    body = {"series": [{"values": values(s), "future": {"promo": ahead[s]}} for s in range(2)]}
    response = served("svc-future").post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    got = np.array([f["values"] for f in response.json()["forecasts"]])
    mlflow.set_tracking_uri(store)
    model = mlflow.pyfunc.load_model("models:/svc-future@champion")
    windows = np.array([values(0), values(1)])
    expected = model.predict({"values": windows, "future": np.array(ahead, dtype=float)[..., None]})
    # the answer keeps the network's digits: float32 on the z-scored scale, 1e-6 of the spread
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * windows.std())
    other = model.predict({"values": windows, "future": np.zeros((2, HORIZON, 1))})
    assert not np.allclose(other, expected)  # the values sent change the forecast


@pytest.mark.parametrize(
    ("future", "field", "words"),
    [
        (None, "series[1].future.promo", "required: 4 values, one per forecast step"),
        ({}, "series[1].future.promo", "required: 4 values"),
        ({"promo": [0, 1]}, "series[1].future.promo", "2 values; expected 4, one per forecast step"),
        ({"promo": [0, 1, 0, 0, 1]}, "series[1].future.promo", "5 values; expected 4"),
        ({"promo": [0, 0, 0, 0], "temp": [1, 1, 1, 1]}, "series[1].future.temp", "unknown future covariate"),
        ({"promo": [0, "x", 0, 0]}, "series[1].future.promo[1]", '"x" is not a number'),
        ({"promo": [0, None, 0, 0]}, "series[1].future.promo[1]", "null is not a number"),
    ],
)
def test_a_bad_future_covariate_is_a_422_naming_it(served, future, field, words):
    second = {"values": values(1)} if future is None else {"values": values(1), "future": future}
    body = {"series": [{"values": values(0), "future": {"promo": [0, 0, 0, 0]}}, second]}
    response = served("svc-future").post("/v1/predict", json=body)
    assert response.status_code == 422, response.text
    problems = {p["field"]: p["msg"] for p in response.json()["detail"]}
    assert field in problems and words in problems[field], problems


def test_a_model_without_future_covariates_refuses_them(served):
    body = {"series": [{"values": values(0), "future": {"promo": [0, 0, 0, 0]}}]}
    response = served("svc-panel").post("/v1/predict", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "series[0].future.promo"
    assert "it takes none" in response.json()["detail"][0]["msg"]


def test_a_panel_model_scales_each_request_window_by_itself(served):
    base = np.array(values(3, level=5.0))
    body = {"series": [{"values": base.tolist()}, {"values": (800 * base + 3).tolist()}]}
    client = served("svc-panel")
    info = client.get("/v1/model").json()
    response = client.post("/v1/predict", json=body)
    assert info["panel"] is True
    assert response.status_code == 200, response.text
    small, large = (np.array(f["values"]) for f in response.json()["forecasts"])
    np.testing.assert_allclose(large, 800 * small + 3, rtol=1e-4)  # no other series' statistics


def test_series_id_selects_a_panel_models_learned_series_vector(served):
    """`series_id` reaches a model with a series embedding: a seen id forecasts with its own
    vector, an unseen id and no id with the "unknown" one (so alike)."""
    window = values(4, level=5.0)
    body = {
        "series": [
            {"values": window, "series_id": "small"},
            {"values": window, "series_id": "large"},
            {"values": window, "series_id": "never-seen"},
            {"values": window},
        ]
    }
    response = served("svc-embedded").post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    small, large, unseen, anonymous = (np.array(f["values"]) for f in response.json()["forecasts"])
    assert not np.allclose(small, large) and not np.allclose(small, unseen)
    np.testing.assert_allclose(unseen, anonymous, rtol=1e-6)


def logged_forecasts(log_url: str) -> dict[tuple[str, str], list[float]]:
    """(role, series id) -> the logged forecast values, by step."""
    engine = open_for_reading(log_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(forecasts.c.role, forecasts.c.series_id, forecasts.c.forecast)
            ).all()
    finally:
        engine.dispose()
    return {(role, series_id): np.frombuffer(blob, "<f8").tolist() for role, series_id, blob in rows}


def test_a_challenger_in_shadow_gets_the_future_covariates_sent_to_the_champion(store, tmp_path):
    """The champion's own version as the challenger: with the request's `future` values it must
    log the champion's very forecasts (without them it would forecast something else, or fail)."""
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    stamps = pd.date_range("2022-01-01", periods=LOOKBACK, freq="D").strftime("%Y-%m-%d").tolist()
    ahead = {"quiet": [0, 0, 0, 0], "promoted": [1, 1, 1, 1]}
    body = {
        "series": [
            {"values": values(5), "timestamps": stamps, "series_id": key, "future": {"promo": promo}}
            for key, promo in ahead.items()
        ]
    }
    with serving(
        store,
        "models:/svc-future@champion",
        forecast_log_url=log_url,
        challenger_model_uri="models:/svc-future/1",
    ) as client:
        state = client.app.state
        until(lambda: state.shadow.store.current is not None, "the challenger loaded (in the background)")
        response = client.post("/v1/predict", json=body)
        assert response.status_code == 200, response.text
        assert state.shadow.flush() and state.forecast_log.flush()
        assert state.shadow.counts == {"scored": 1, "dropped": 0, "skipped": 0}
    logged = logged_forecasts(log_url)
    answered = {key: f["values"] for key, f in zip(ahead, response.json()["forecasts"], strict=True)}
    for key in ahead:
        # the log keeps the float64 forecasts, the answer float32's digits of them
        np.testing.assert_allclose(logged[("challenger", key)], answered[key], rtol=1e-6)
        np.testing.assert_allclose(logged[("champion", key)], answered[key], rtol=1e-6)
    assert not np.allclose(answered["quiet"], answered["promoted"])  # the covariate mattered
