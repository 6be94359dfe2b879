"""Bodies: the size limit holds for both framings, and large bodies parse in a helper process
with the same answers as small ones parsed inline.

The tests that change only the body parser's thresholds (attributes of the running parser, put
back after each) share one server with the default settings (``parsing``); those that need other
settings (a size limit, a body deadline) start their own."""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

import service.predict_endpoint
from tests.service.conftest import live_server
from tests.service.gated_parse import held_predict_parse
from tests.service.raw_http import exchange
from tests.service.test_http import window

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast


def raw_request(url: str, head: str, body_parts: list[bytes], timeout: float = 10.0) -> tuple[int, bytes]:
    """Send a request byte for byte (e.g. chunked) and return (status, body)."""
    status, _, body = exchange(url, head, body_parts, timeout)
    return status, body


def chunked(data: bytes, size: int = 1024) -> list[bytes]:
    parts = [
        f"{len(data[i : i + size]):x}\r\n".encode() + data[i : i + size] + b"\r\n"
        for i in range(0, len(data), size)
    ]
    return [*parts, b"0\r\n\r\n"]


@pytest.fixture(scope="module")
def parsing(model_store) -> Iterator[tuple[str, FastAPI]]:
    """(url, app) of a live server with the default settings, shared by the module's tests that
    set the parser's thresholds themselves (``parser_set``): a server start costs a model load and
    a parser helper process."""
    with live_server(model_store, "models:/svc-lstm@champion") as server:
        yield server


@contextmanager
def parser_set(app: FastAPI, **attributes: float) -> Iterator[None]:
    """The running body parser's ``attributes`` (offload_bytes, timeout) set for the block, then
    put back for the next test on the shared server."""
    parser = app.state.parser
    before = {name: getattr(parser, name) for name in attributes}
    for name, value in attributes.items():
        setattr(parser, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(parser, name, value)


def metric_value(metrics: str, sample: str) -> float:
    """The value of the exposition line for ``sample`` (name and labels); 0 when absent."""
    for line in metrics.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_the_size_limit_answers_413_for_declared_and_chunked_bodies(model_store):
    body = json.dumps({"series": [{"values": window(14)} for _ in range(200)]}).encode()  # ~60 KB
    with live_server(model_store, "models:/svc-lstm@champion", max_body_bytes=16384) as (url, _):
        declared = f"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        status, answer = raw_request(url, declared, [body])
        assert status == 413 and b"larger than 16384 bytes" in answer
        counted = 'forecast_http_requests_total{route="/v1/predict",status="413"} 1.0'
        assert counted in httpx.get(f"{url}/metrics").text  # answered before routing, counted under its path
        streamed = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        status, answer = raw_request(url, streamed, chunked(body))
        assert status == 413 and b"larger than 16384 bytes" in answer, answer
        small = json.dumps({"series": [{"values": window(14)}]}).encode()
        status, _ = raw_request(url, streamed, chunked(small, 64))
        assert status == 200


def test_large_bodies_parsed_in_the_helper_process_answer_like_small_ones(parsing):
    series = [{"values": window(14, seed=s)} for s in range(40)]
    bad = {"series": [*series[:5], {"values": [*window(13), "x"]}]}
    url, app = parsing
    inline = httpx.post(f"{url}/v1/predict", json={"series": series}).json()
    rejected_inline = httpx.post(f"{url}/v1/predict", json=bad).json()
    with parser_set(app, offload_bytes=1024):  # these bodies go to the helper
        offloaded = httpx.post(f"{url}/v1/predict", json={"series": series}).json()
        rejected = httpx.post(f"{url}/v1/predict", json=bad)
    np.testing.assert_array_equal(
        [f["values"] for f in offloaded["forecasts"]], [f["values"] for f in inline["forecasts"]]
    )
    assert rejected.status_code == 422 and rejected.json() == rejected_inline
    assert rejected.json()["detail"][0]["field"] == "series[5].values[13]"


def test_a_client_that_hangs_up_or_stalls_mid_body_is_never_a_500(model_store):
    with live_server(model_store, "models:/svc-lstm@champion", body_timeout_s=1.0) as (url, _):
        head = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 93\r\n\r\n"
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:  # 20 of 93 bytes, then gone
            sock.sendall(head.encode() + b'{"series": [{"value')
        status, answer = raw_request(url, head, [b'{"series": [{"value'], timeout=10)  # then silence
        assert status == 408 and b"did not arrive within 1 s" in answer
        metrics = httpx.get(f"{url}/metrics").text
    assert 'route="/v1/predict",status="500"' not in metrics
    assert 'forecast_http_requests_total{route="/v1/predict",status="499"} 1.0' in metrics


def test_bad_input_costs_a_short_answer_whatever_its_size(parsing):
    """80,000 empty series or 50,000 booleans used to come back as an 8.9 MB list of errors after
    seconds of work on the event loop."""
    url, app = parsing
    refused = 'forecast_http_requests_total{route="/v1/predict",status="422"}'
    refused_before = metric_value(httpx.get(f"{url}/metrics").text, refused)  # the server is shared
    with parser_set(app, offload_bytes=1_000_000):  # parsed inline, on the event loop
        for body in (
            '{"series": [' + ",".join(["{}"] * 80_000) + "]}",
            '{"series": [{"values": [' + ",".join(["true"] * 50_000) + "]}]}",
            json.dumps({"series": [{"values": [1.0]}] * 1100}),
        ):
            response = httpx.post(
                f"{url}/v1/predict", content=body, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 422 and len(response.content) < 4096, response.text[:300]
        many = json.dumps({"series": [{"values": [1.0] * 5}] * 1000})
        response = httpx.post(f"{url}/v1/predict", content=many, headers={"Content-Type": "application/json"})
        problems = response.json()["detail"]
        assert len(problems) == 20 and problems[-1]["msg"] == "... and 981 more problems"
        metrics = httpx.get(f"{url}/metrics").text
    assert metric_value(metrics, refused) - refused_before == 4


def test_a_body_too_slow_to_parse_is_refused_and_its_helper_replaced(parsing, tmp_path, monkeypatch):
    """The first body's parse is held in the helper (it waits for a file that never appears) past
    the parser's timeout; the second, parsed as usual by the replacement helper, is answered."""
    series = [{"values": window(14, seed=s)} for s in range(40)]
    held = functools.partial(service.predict_endpoint.parse_body, parse_with=functools.partial(
        held_predict_parse, str(tmp_path / "never")))  # fmt: skip
    url, app = parsing
    with parser_set(app, offload_bytes=1024):
        with parser_set(app, timeout=0.5), monkeypatch.context() as patch:
            patch.setattr(service.predict_endpoint, "parse_body", held)
            refused = httpx.post(f"{url}/v1/predict", json={"series": series})
        with parser_set(app, timeout=30.0):
            again = httpx.post(f"{url}/v1/predict", json={"series": series})
    assert refused.status_code == 413 and "longer than" in refused.json()["detail"]
    assert again.status_code == 200 and len(again.json()["forecasts"]) == 40
