"""FastAPI's side of the HTTP envelope (service/envelope.py): one ASGI middleware around every route
FastAPI answers. It refuses a declared body over MAX_BODY_BYTES before routing (413, the predict
handler's own check) and counts each request in the metrics as the predict handler does
(``ServiceMetrics.count_request``). The rest of the envelope is per route: the key in
service/security.py's dependencies, the body read and parsed with ``read_body`` and ``parse_body``
by the one route that takes a body (POST /v1/actuals), so no body is read before its key is
checked, and a chunked one is bounded while it streams in."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.envelope import Refusal, check_declared_length, send_refusal
from service.metrics import ServiceMetrics


class Envelope:
    def __init__(
        self, app: ASGIApp, metrics: ServiceMetrics, max_bytes: int, paths: frozenset[str] = frozenset()
    ) -> None:
        self.app, self.metrics, self.max_bytes, self.paths = app, metrics, max_bytes, paths

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
            try:
                check_declared_length(dict(scope["headers"]).get(b"content-length"), self.max_bytes)
            except Refusal as refusal:
                await send_refusal(record_status, refusal)
                return
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or self.known(scope)
            self.metrics.count_request(name, status, time.perf_counter() - started)
