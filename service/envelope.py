"""The HTTP envelope: the checks every route that takes callers' requests makes around its own
work, written once for both request paths.

Why plain functions over the raw header list, the body bytes and ASGI's ``receive``: POST
/v1/predict is answered by a plain ASGI handler before FastAPI (service/predict_endpoint.py, for
its measured speed) and everything else by FastAPI's routes (service/middleware.py wraps them);
both call these, so the fast path pays for no Request object or dependency resolution, and the
two paths cannot drift apart in what they answer. Each check raises a ``Refusal``: an
``HTTPException``, so FastAPI answers it with its own handler, and the predict handler with
``send_refusal``; both write the same ``{"detail": ...}`` with the same headers.

  413  the declared Content-Length is over MAX_BODY_BYTES (``check_declared_length``), or the body
       grows past it while it streams in (``read_body``; chunked bodies declare no length)
  401  API_KEY is set and the request lacks it (``service.security.check_key``)
  503  no model is loaded yet (``served_model``); every 503 carries Retry-After (``unavailable``)
  415  the body is not declared as JSON (``check_json``)
  408  the body did not arrive within BODY_TIMEOUT_S (``read_body``)
  413/503  a large body took too long to parse off the event loop, or too many are waiting
       (``parse_body``)
Request metrics are recorded by ``ServiceMetrics.count_request`` on both paths."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.types import Receive, Scope, Send

from service.model_store import LoadedModel, ModelStore, not_ready_reason
from service.parsing import BodyParser, ParserBusyError, ParseTimeoutError, declares_json, parse_in_worker

Headers = dict[bytes, bytes]  # lower-case names; a repeated one keeps its last value
CLIENT_GONE = 499  # nginx's "client closed request": recorded in metrics, never read by anyone
JSON = (b"content-type", b"application/json")
TEXT = (b"content-type", b"text/plain; charset=utf-8")


class Refusal(HTTPException):
    """An answer other than 200: status, JSON-able detail, extra headers. An HTTPException, so a
    FastAPI route may raise it as it is."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, detail, headers or {})


class ClientGone(Exception):
    """The client hung up before its answer: there is nobody to send it to."""


def unavailable(message: str, retry_after: int = 1) -> Refusal:
    """503: the caller may try again after ``retry_after`` seconds."""
    return Refusal(503, message, {"Retry-After": str(retry_after)})


def headers_of(scope: Scope) -> Headers:
    return dict(scope["headers"])


def too_large(limit: int) -> Refusal:
    return Refusal(413, f"request body is larger than {limit} bytes; send fewer series per request")


def check_declared_length(declared: bytes | None, limit: int) -> None:
    """Before anything else, as a proxy would: a body announced larger than the limit is not read."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)


def check_json(headers: Headers) -> None:
    content_type = headers.get(b"content-type", b"").decode("latin-1")
    if not declares_json(content_type):
        detail = f"Content-Type is {content_type or 'missing'!r}; send the body as application/json"
        raise Refusal(415, detail)


def served_model(store: ModelStore) -> LoadedModel:
    """The model being served, or 503 saying why there is none yet."""
    model = store.current
    if model is None:
        raise unavailable(not_ready_reason(store), retry_after=5)
    return model


async def read_body(receive: Receive, limit: int, timeout: float) -> bytes:
    """The whole body: 408 when it takes longer than ``timeout``, 413 once it grows past ``limit``,
    ClientGone on a hang-up. A route reads its body only through this, after its key was checked."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):  # a context, not a task per request
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise too_large(limit)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise Refusal(408, f"the body did not arrive within {timeout:g} s") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def parse_body(
    parser: BodyParser,
    body: bytes,
    parse_with: Callable[[bytes], Any] = parse_in_worker,
    fewer: str = "series",
) -> Any:
    """``parse_with(body)`` through the parser (off the event loop when large): 413 when it takes
    too long, 503 when too many large bodies wait; RequestProblems (422) as the parser raises them."""
    try:
        return await parser.parse(body, parse_with)
    except ParseTimeoutError as exc:
        raise Refusal(413, f"{exc}; send fewer {fewer}") from None
    except ParserBusyError as exc:
        raise unavailable(f"busy: {exc}") from None


async def send_refusal(send: Send, refusal: HTTPException) -> int:
    return await send_json(send, refusal.status_code, {"detail": refusal.detail}, refusal.headers)


async def send_json(send: Send, status: int, document: Any, headers: Mapping[str, str] | None = None) -> int:
    extra = [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    return await send_bytes(send, status, orjson.dumps(document), JSON, *extra)


async def send_bytes(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> int:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
    return status
