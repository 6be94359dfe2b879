"""Bodies: the size limit holds for both framings, and large bodies parse in a helper process
with the same answers as small ones parsed inline."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlparse

import httpx
import numpy as np

from tests.service.conftest import live_server
from tests.service.test_http import window


def raw_request(url: str, head: str, body_parts: list[bytes], timeout: float = 10.0) -> tuple[int, bytes]:
    """Send a request byte for byte (e.g. chunked) and return (status, body)."""
    address = urlparse(url)
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        for part in body_parts:
            try:
                sock.sendall(part)
            except (BrokenPipeError, ConnectionResetError):  # the server answered and hung up
                break
        response = b""
        while b"\r\n\r\n" not in response or len(response.partition(b"\r\n\r\n")[2]) < _length(response):
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    status = int(response.split(b" ", 2)[1])
    return status, response.partition(b"\r\n\r\n")[2]


def _length(response: bytes) -> int:
    for line in response.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    return 0


def chunked(data: bytes, size: int = 1024) -> list[bytes]:
    parts = [
        f"{len(data[i : i + size]):x}\r\n".encode() + data[i : i + size] + b"\r\n"
        for i in range(0, len(data), size)
    ]
    return [*parts, b"0\r\n\r\n"]


def test_the_size_limit_answers_413_for_declared_and_chunked_bodies(model_store):
    body = json.dumps({"series": [{"values": window(14)} for _ in range(200)]}).encode()  # ~60 KB
    with live_server(model_store, "models:/svc-lstm@champion", max_body_bytes=16384) as (url, _):
        declared = f"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        status, answer = raw_request(url, declared, [body])
        assert status == 413 and b"larger than 16384 bytes" in answer
        streamed = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        status, answer = raw_request(url, streamed, chunked(body))
        assert status == 413 and b"larger than 16384 bytes" in answer, answer
        small = json.dumps({"series": [{"values": window(14)}]}).encode()
        status, _ = raw_request(url, streamed, chunked(small, 64))
        assert status == 200


def test_large_bodies_parsed_in_the_helper_process_answer_like_small_ones(model_store):
    series = [{"values": window(14, seed=s)} for s in range(40)]
    bad = {"series": [*series[:5], {"values": [*window(13), "x"]}]}
    with live_server(model_store, "models:/svc-lstm@champion") as (url, app):
        inline = httpx.post(f"{url}/v1/predict", json={"series": series}).json()
        rejected_inline = httpx.post(f"{url}/v1/predict", json=bad).json()
        app.state.parser.offload_bytes = 1024  # from now on these bodies go to the helper
        offloaded = httpx.post(f"{url}/v1/predict", json={"series": series}).json()
        rejected = httpx.post(f"{url}/v1/predict", json=bad)
    np.testing.assert_array_equal(
        [f["values"] for f in offloaded["forecasts"]], [f["values"] for f in inline["forecasts"]]
    )
    assert rejected.status_code == 422 and rejected.json() == rejected_inline
    assert rejected.json()["detail"][0]["field"] == "series[5].values[13]"
