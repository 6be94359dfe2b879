"""ASGI middlewares: request metrics, and a body size limit (413) that also covers chunked bodies."""

from __future__ import annotations

import time

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.metrics import ServiceMetrics


class RequestMetrics:
    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, paths: frozenset[str] = frozenset()) -> None:
        self.app, self.metrics, self.paths = app, metrics, paths

    def known(self, scope: Scope) -> str:
        """A request answered before routing (e.g. 413 on its Content-Length) still counts under
        its route's path when it names one; anything else is "unmatched" (bounded label values)."""
        return scope["path"] if scope["path"] in self.paths else "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or self.known(scope)
            self.metrics.requests.labels(name, str(status)).inc()
            self.metrics.latency.labels(name).observe(time.perf_counter() - started)


class BodyTooLargeError(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def too_large(self) -> JSONResponse:
        return JSONResponse(
            {"detail": f"request body is larger than {self.max_bytes} bytes; send fewer series per request"},
            status_code=413,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self.too_large()(scope, receive, send)
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLargeError
            return message

        try:
            await self.app(scope, counted, send)
        except BodyTooLargeError:
            await self.too_large()(scope, receive, send)
