"""Property-based contract test: Schemathesis generates requests from the app's own OpenAPI document
(/openapi.json, narrowed to the served model once it has loaded) and checks every answer against it.

The app runs under a real uvicorn server on loopback, so what is checked is what goes over the wire:
no 5xx, status codes, content types, headers and bodies as documented, and malformed requests
(Schemathesis' negative cases) rejected with a 4xx.

``positive_data_acceptance`` ("a schema-valid request is accepted") is applied only to cases without
``timestamps``: the schema cannot say "one per value, evenly spaced at the model's frequency", so
generated timestamps are practically always (rightly) refused with 422. For the same reason fuzzing
never gets a forecast with timestamps back; ``test_forecast_timestamps_keep_the_contract`` sends one.
A share of the generated predict requests must reach the model (200), so the run exercises
forecasting, not only validation."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import pytest
import requests
import schemathesis
import torch
import uvicorn
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup, as_reported_failure
from schemathesis.core.result import Err
from schemathesis.pytest.lazy import get_all_tests
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.main import create_app
from service.settings import ServiceSettings

# the module's models are trained once (make test runs a module on one worker: --dist loadfile)
pytestmark = pytest.mark.slow

MODELS = ("svc-lstm", "svc-seq2seq-attention")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]
ACCEPTING = [*CHECKS, positive_data_acceptance]
PREDICT = "POST /v1/predict"
OPERATIONS = {
    "GET /healthz",
    "GET /readyz",
    "GET /v1/model",
    PREDICT,
    "GET /v1/admin/status",
    "POST /v1/admin/reload",
}
MIN_PREDICT_ANSWERS = 5  # generated predict requests that must come back 200 (typically 30+)
# Bounded for CI: fuzzing draws at most this many cases per operation (the examples and coverage
# phases add their own, deterministic, ~100 for predict); no example database is written.
BOUNDS = settings(max_examples=50, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@contextmanager
def uvicorn_server(app: FastAPI) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port, in a background thread; yields its base URL
    once the port is open (the lifespan has run, the model may still be loading)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    config = uvicorn.Config(app, lifespan="on", log_config=None, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive(), "uvicorn exited during start-up"
            assert time.monotonic() < deadline, "uvicorn did not start within 60 s"
            time.sleep(0.05)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def wait_ready(url: str, timeout: float = 120.0) -> None:
    """The model loads in the background; the schema is model-specific only once /readyz is 200."""
    deadline = time.monotonic() + timeout
    while (response := requests.get(f"{url}/readyz", timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, f"not ready after {timeout} s: {response.text}"
        time.sleep(0.1)


def carries_timestamps(case: schemathesis.Case) -> bool:
    series = case.body.get("series") if isinstance(case.body, dict) else None
    return isinstance(series, list) and any(
        isinstance(item, dict) and item.get("timestamps") is not None for item in series
    )


def checks_for(case: schemathesis.Case) -> list:
    return CHECKS if carries_timestamps(case) else ACCEPTING


@contextmanager
def reported() -> Iterator[None]:
    """Schemathesis' failures as it reports them under pytest: each check that failed, the response,
    and a curl command that reproduces it."""
    __tracebackhide__ = True
    try:
        yield
    except FailureGroup as failures:
        raise as_reported_failure(failures) from None


@pytest.fixture(autouse=True)
def subnormal_floats() -> Iterator[None]:
    """Training the ``model_store`` models turns torch's flush-denormal on in this thread
    (forecaster/training.py) and leaves it on; Hypothesis then refuses to generate floats
    ("can't represent subnormal floats"). Off while the test runs, as it was after. (The server
    sets its own in its thread.)"""
    flushing = sys.float_info.min / 2 == 0
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(flushing)


@pytest.fixture(scope="module", params=MODELS)
def api(request, model_store) -> Iterator[str]:
    """Base URL of the API serving one registered model, loaded; no API key (admin routes: 403)."""
    settings = ServiceSettings(
        mlflow_tracking_uri=model_store,
        model_uri=f"models:/{request.param}@champion",
        reload_interval_s=0,
        api_key=None,
    )
    with uvicorn_server(create_app(settings)) as url:
        wait_ready(url)
        yield url


def test_the_api_keeps_its_contract(api: str, subtests: pytest.Subtests) -> None:
    """Every operation in the served document, through Schemathesis' examples, coverage and fuzzing
    phases (positive and negative cases), each operation a subtest."""
    schema = schemathesis.openapi.from_url(f"{api}/openapi.json")
    predict_statuses: Counter[int] = Counter()

    def call_and_check(case: schemathesis.Case) -> None:
        response = case.call(base_url=api, timeout=60)
        if case.operation.label == PREDICT:
            predict_statuses[response.status_code] += 1
        case.validate_response(response, checks=checks_for(case))

    # ``schemathesis.pytest.from_fixture(...).parametrize()`` is the documented way to test a schema
    # that exists only once a fixture ran, but 4.32.5's lazy schema sets ``Function._nodeid``, which
    # pytest 9.2 no longer has (AttributeError). This is the loop it runs, minus that.
    tested, passed = set(), set()
    for result in get_all_tests(schema=schema, test_func=call_and_check, settings=BOUNDS, given_kwargs=None):
        if isinstance(result, Err):
            with subtests.test(msg=f"invalid operation: {result.err()}"):
                raise result.err()
            continue
        operation, run = result.ok()
        tested.add(operation.label)
        with subtests.test(msg=operation.label), reported():
            run()
            passed.add(operation.label)

    assert tested >= OPERATIONS, f"operations missing from the document: {OPERATIONS - tested}"
    if PREDICT in passed:  # otherwise its subtest failed, and says why
        # Else the run could pass while exercising nothing but validation.
        assert predict_statuses[200] >= MIN_PREDICT_ANSWERS, (
            f"only {predict_statuses[200]} generated predict requests reached the model (200); "
            f"statuses: {dict(predict_statuses)}"
        )


def test_forecast_timestamps_keep_the_contract(api: str) -> None:
    """A window with timestamps evenly spaced at the model's frequency: the forecast's own
    timestamps must match the documented response schema too."""
    model = requests.get(f"{api}/v1/model", timeout=10).json()
    lookback, features = model["lookback"], len(model["features"])
    stamps = pd.date_range("1989-06-01", periods=lookback, freq=model["frequency"])
    rows = [[10.0 + (step % 7) + feature for feature in range(features)] for step in range(lookback)]
    values = [row[0] for row in rows] if features == 1 else rows
    body = {"series": [{"values": values, "timestamps": [stamp.isoformat() for stamp in stamps]}]}
    schema = schemathesis.openapi.from_url(f"{api}/openapi.json")
    case = schema["/v1/predict"]["POST"].Case(body=body, media_type="application/json")
    response = case.call(base_url=api, timeout=60)
    assert response.status_code == 200, response.text
    assert len(response.json()["forecasts"][0]["timestamps"]) == model["horizon"]
    with reported():
        case.validate_response(response, checks=checks_for(case))
