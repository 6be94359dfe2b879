"""What a client sees beside the forecasts: numbers with float32's digits, 405 (with Allow) for a
wrong method on a known path, and predict first in /docs."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.responses import network_digits
from service.settings import ServiceSettings


@pytest.fixture
def client(tmp_path) -> TestClient:
    """The app without its lifespan: routing and the OpenAPI document need no model."""
    settings = ServiceSettings(mlflow_tracking_uri=f"sqlite:///{tmp_path / 'absent.db'}", reload_interval_s=0)
    return TestClient(create_app(settings))


def written(values: np.ndarray, spread: np.ndarray | None) -> list[list[float]]:
    return orjson.loads(
        orjson.dumps({"v": network_digits(values, spread)}, option=orjson.OPT_SERIALIZE_NUMPY)
    )["v"]


def test_forecasts_are_written_with_the_networks_digits_not_float64_noise():
    values = np.array([[12.345678901234, -0.1 / 3], [123456.789012, 123457.0]])
    # float32 on the z-scored scale resolves about 1e-6 of the spread: 6 decimals at a spread of 4
    assert written(values, np.array([4.0, 400.0])) == [[12.345679, -0.033333], [123456.7890, 123457.0]]
    assert written(values, None) == [[12.345679, -0.033333335], [123456.79, 123457.0]]  # float32's own


def test_a_high_level_with_a_small_spread_keeps_the_units_the_network_resolved():
    # float32 of the value itself would answer 123456792: 3 units off on a series that moves by 1
    assert written(np.array([[123456789.123456]]), np.array([1.0])) == [[123456789.123456]]
    assert written(np.array([[0.000123456789]]), np.array([1e-4])) == [[0.0001234568]]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("GET", "/v1/predict", "POST"), ("PUT", "/v1/predict", "POST"), ("GET", "/v1/actuals", "POST"),
     ("POST", "/readyz", "GET")],
)  # fmt: skip
def test_a_wrong_method_on_a_known_path_is_405_with_allow(client, method, path, allowed):
    response = client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allowed


def test_an_unknown_path_is_still_404(client):
    assert client.get("/v1/nothing-here").status_code == 404


def test_predict_comes_first_in_the_openapi_document(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert next(iter(paths)) == "/v1/predict" and list(paths["/v1/predict"]) == ["post"]
    assert list(paths).count("/v1/predict") == 1
