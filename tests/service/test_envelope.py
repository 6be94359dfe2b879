"""One HTTP envelope: POST /v1/predict (a plain ASGI handler) and POST /v1/actuals (a FastAPI
route) give the same answers to the checks every route makes (body size, key, slow body), are
counted by the same code, and a huge body parsed for one does not hold the others back."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

import service.monitoring_routes
from tests.service.conftest import live_server
from tests.service.gated_parse import gated_parse
from tests.service.raw_http import exchange

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast

MODEL = "models:/svc-lstm@champion"
KEY = "k3y"
LIMIT = 16384
ROUTES = ("/v1/predict", "/v1/actuals")
COMPARED = ("content-type", "www-authenticate", "retry-after")  # the headers an answer is made of


@pytest.fixture(scope="module")
def guarded(model_store, tmp_path_factory) -> Iterator[tuple[str, object]]:
    """One live server with a key, a forecast log (actuals need one), a small body limit and a
    short body timeout: BODY_TIMEOUT_S is what a slow-body test waits for."""
    log_url = f"sqlite:///{tmp_path_factory.mktemp('envelope') / 'forecasts.db'}"
    with live_server(
        model_store, MODEL, api_key=KEY, forecast_log_url=log_url, max_body_bytes=LIMIT, body_timeout_s=1.0
    ) as (url, app):
        yield url, app


def head(path: str, *fields: str) -> str:
    return "\r\n".join(
        [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json", *fields, "", ""]
    )


def answer(status: int, headers: dict, body: bytes) -> tuple[int, dict, object]:
    """What a caller is told: status, the headers that carry meaning, the JSON document."""
    return status, {name: headers.get(name) for name in COMPARED}, json.loads(body)


def chunked(data: bytes, size: int = 1024) -> list[bytes]:
    parts = [
        f"{len(data[i : i + size]):x}\r\n".encode() + data[i : i + size] + b"\r\n"
        for i in range(0, len(data), size)
    ]
    return [*parts, b"0\r\n\r\n"]


def both(ask) -> dict[str, tuple[int, dict, object]]:
    """The answers of both routes to the same request."""
    return {path: answer(*ask(path)) for path in ROUTES}


def same_answer(answers: dict[str, tuple[int, dict, object]]) -> tuple[int, dict, object]:
    predict, actuals = answers["/v1/predict"], answers["/v1/actuals"]
    assert predict == actuals, answers
    return predict


def test_a_body_declared_too_large_is_a_413_before_anything_else(guarded):
    url, _ = guarded
    # no key either: the size is refused first, as a proxy would, and no byte of the body is sent
    status, headers, document = same_answer(
        both(lambda path: exchange(url, head(path, f"Content-Length: {LIMIT + 1}")))
    )
    assert status == 413 and headers["content-type"] == "application/json"
    assert document == {"detail": f"request body is larger than {LIMIT} bytes; send fewer series per request"}


def test_a_body_streamed_past_the_limit_is_a_413(guarded):
    url, _ = guarded
    fields = (f"X-API-Key: {KEY}", "Transfer-Encoding: chunked")
    body = b'{"series": [' + b"1.0," * (LIMIT // 4 + 256) + b"1.0]}"  # just past the limit
    status, _, document = same_answer(both(lambda path: exchange(url, head(path, *fields), chunked(body))))
    assert status == 413 and document["detail"].startswith(f"request body is larger than {LIMIT} bytes")


@pytest.mark.parametrize(
    "key", [None, "X-API-Key: wrong", "Authorization: Bearer wrong"], ids=["missing", "wrong", "wrong-bearer"]
)
def test_the_key_is_checked_before_the_body_is_read(guarded, key):
    """The body is announced and never sent: a 401 at once (not the 408 its absence would earn)."""
    url, _ = guarded
    fields = [f"Content-Length: {LIMIT}"] + ([key] if key else [])
    status, headers, document = same_answer(both(lambda path: exchange(url, head(path, *fields))))
    assert status == 401 and headers["www-authenticate"] == "Bearer"
    assert document == {"detail": "missing or wrong API key (send it as X-API-Key)"}


def test_a_body_that_stalls_is_a_408(guarded):
    """20 of 200 announced bytes, then silence: each route answers once BODY_TIMEOUT_S is over."""
    url, _ = guarded
    fields = (f"X-API-Key: {KEY}", "Content-Length: 200")
    status, _, document = same_answer(
        both(lambda path: exchange(url, head(path, *fields), [b'{"series": [{"value']))
    )
    assert status == 408 and document == {"detail": "the body did not arrive within 1 s"}


def counted(metrics: str, route: str, status: int) -> float:
    prefix = f'forecast_http_requests_total{{route="{route}",status="{status}"}} '
    return next((float(line[len(prefix) :]) for line in metrics.splitlines() if line.startswith(prefix)), 0.0)


def test_both_routes_are_counted_by_the_same_code(guarded):
    url, app = guarded
    metrics = app.state.metrics
    calls: list[tuple[str, int]] = []
    real = metrics.count_request

    def spy(route: str, status: int, seconds: float) -> None:
        calls.append((route, status))
        real(route, status, seconds)

    before = httpx.get(f"{url}/metrics").text
    metrics.count_request = spy  # both paths look it up per request
    try:
        for path in ROUTES:
            assert httpx.post(f"{url}{path}", json={"series": []}).status_code == 401
            declared = exchange(url, head(path, f"Content-Length: {LIMIT + 1}"))
            assert declared[0] == 413
    finally:
        del metrics.count_request
    after = httpx.get(f"{url}/metrics").text
    for path in ROUTES:
        assert calls.count((path, 401)) == calls.count((path, 413)) == 1, calls
        for status in (401, 413):
            assert counted(after, path, status) == counted(before, path, status) + 1
        assert f'forecast_http_request_duration_seconds_count{{route="{path}"}}' in after


def test_a_huge_actuals_body_being_parsed_does_not_hold_back_other_requests(
    model_store, tmp_path, monkeypatch
):
    """The parse of a large body runs in the parser's helper process; here it is held there (it
    waits for a gate file) until /healthz has answered, so the test shows the event loop free
    while the parse is under way, whatever the machine's speed."""
    gate = tmp_path / "gate"
    monkeypatch.setattr(
        service.monitoring_routes, "parse_in_worker", functools.partial(gated_parse, str(gate))
    )
    values = 20_000  # about 0.6 MB
    days = np.datetime64("1940-01-01", "D") + np.arange(values)  # on the daily model's grid, all past
    stamps = [str(t) for t in np.datetime_as_string(days.astype("datetime64[s]"), "s")]
    body = {"series": [{"series_id": "huge", "timestamps": stamps, "values": [1.0] * values}]}
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with live_server(
        model_store,
        MODEL,
        forecast_log_url=log_url,
        monitoring_open_without_api_key=True,
        actuals_accept_unknown_series=True,
        parse_offload_bytes=1024,
        parse_timeout_s=120,
    ) as (url, _):
        posted: dict[str, httpx.Response] = {}
        poster = threading.Thread(
            target=lambda: posted.update(answer=httpx.post(f"{url}/v1/actuals", json=body, timeout=120))
        )
        poster.start()
        started = Path(f"{gate}.started")
        deadline = time.monotonic() + 60
        while not started.exists():  # bounded poll: the helper has the body and holds it
            assert time.monotonic() < deadline and poster.is_alive(), posted
            time.sleep(0.01)
        alive = httpx.get(f"{url}/healthz", timeout=30)
        still_parsing = poster.is_alive()
        gate.touch()
        poster.join(timeout=120)
    assert alive.status_code == 200 and still_parsing
    assert posted["answer"].status_code == 200, posted["answer"].text
    assert posted["answer"].json()["stored"] == values
