"""Nothing secret leaks, admin is off without a key, and the key is checked before the body."""

from __future__ import annotations

import io
import logging
import socket
import time

import pytest

from infra.redaction import RedactingFormatter, redact, redact_handlers
from tests.service.conftest import live_server, serving
from tests.service.test_http import window

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast

BODY = {"series": [{"values": window(14)}]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pass@mlflow:5000/api", "http://***@mlflow:5000/api"),
        ("postgresql://mlflow:s3cr3t@db/mlflow", "postgresql://***@db/mlflow"),
        (
            "HTTPConnectionPool(host='h', port=1): url: http://tok@h/x?X-Amz-Signature=abc&a=1",
            "HTTPConnectionPool(host='h', port=1): url: http://***@h/x?X-Amz-Signature=***&a=1",
        ),
        ("s3://bucket/path?password=hunter2", "s3://bucket/path?password=***"),
        ("postgresql://alice:Top@s3cret@db:5432/log", "postgresql://***@db:5432/log"),  # a raw "@" in it
        ("models:/demo@champion", "models:/demo@champion"),
        ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
    ],
)
def test_redact_hides_credentials_in_uris_and_query_strings(text, expected):
    assert redact(text) == expected


def test_every_log_line_is_redacted_traceback_included():
    """A library's exception quotes the URI it called; the traceback repeats it. The service wraps
    each handler's formatter, so neither reaches the log."""
    stream = io.StringIO()
    logger = logging.getLogger("tests.redaction")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    try:
        redact_handlers(logger)
        redact_handlers(logger)  # once is enough: no formatter wrapped twice
        try:
            raise RuntimeError("API request to http://alice:hunter2@mlflow:5000/api failed")
        except RuntimeError:
            logger.exception("could not reach %s", "postgresql://bob:s3cr3t@db/log")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "Traceback" in text and "raise RuntimeError" in text
    assert "ERROR could not reach postgresql://***@db/log" in text
    assert "http://***@mlflow:5000/api" in text
    assert "hunter2" not in text and "s3cr3t" not in text and "alice" not in text
    assert not isinstance(handler.formatter.inner, RedactingFormatter)


def test_admin_endpoints_are_off_without_a_key_and_need_it_with_one(model_store):
    with serving(model_store, "models:/svc-lstm@champion") as client:
        for method, path in (("POST", "/v1/admin/reload"), ("GET", "/v1/admin/status")):
            response = client.request(method, path)
            assert response.status_code == 403 and "set API_KEY" in response.text
        assert client.post("/v1/predict", json=BODY).status_code == 200  # open, as configured
        assert client.get("/v1/model").status_code == 200
    with serving(model_store, "models:/svc-lstm@champion", api_key="s3cret") as client:
        assert client.post("/v1/admin/reload").status_code == 401
        assert client.get("/v1/admin/status", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get("/v1/model").status_code == 401
        status = client.get("/v1/admin/status", headers={"Authorization": "Bearer s3cret"})
        assert status.status_code == 200 and status.json()["serving"]["version"] == "1"
        reload = client.post("/v1/admin/reload", headers={"X-API-Key": "s3cret"})
        assert reload.json() == {
            "changed": False,
            "message": "already serving models:/svc-lstm/1",
            "version": "1",
        }
        public = client.get("/readyz").json()
        assert public == {"status": "ready", "reason": None, "version": "1", "stale": False}


def test_the_key_is_checked_before_the_body_is_read(model_store):
    """A client without the key announces 50 MB and sends none of it: it is turned away at once."""
    with live_server(
        model_store, "models:/svc-lstm@champion", api_key="s3cret", max_body_bytes=100_000_000
    ) as (
        url,
        _,
    ):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 50000000\r\n\r\n{"
            )
            started = time.monotonic()
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert time.monotonic() - started < 5
