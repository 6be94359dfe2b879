"""What a client sees beside the forecasts: numbers with float32's digits, 405 (with Allow) for a
wrong method on a known path, and predict first in /docs."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.responses import float32_digits
from service.settings import ServiceSettings


@pytest.fixture
def client(tmp_path) -> TestClient:
    """The app without its lifespan: routing and the OpenAPI document need no model."""
    settings = ServiceSettings(mlflow_tracking_uri=f"sqlite:///{tmp_path / 'absent.db'}", reload_interval_s=0)
    return TestClient(create_app(settings))


def test_forecasts_are_written_with_float32_digits_not_float64_noise():
    values = np.array([[12.345678901234, -0.1 / 3, 123456.789012, 1e-8 / 3]])
    written = orjson.loads(orjson.dumps({"v": float32_digits(values)}, option=orjson.OPT_SERIALIZE_NUMPY))[
        "v"
    ]
    assert written == [[12.345679, -0.033333335, 123456.79, 3.3333334e-09]]
    np.testing.assert_allclose(written, values, rtol=1e-7)  # float32's precision, nothing lost beyond


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
