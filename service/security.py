"""The API key. When API_KEY is set, predict, the model description, the monitoring routes and
admin routes need it (X-API-Key or Bearer). Admin routes are off altogether while no key is
configured, so a service started without one cannot be reloaded or inspected by strangers; so are
the monitoring routes (posting actuals, reading the monitor), unless MONITORING_OPEN_WITHOUT_API_KEY
opens them: an anonymous actual changes a model's status, and `forecast retrain` trains on the
actuals.

These are route dependencies on routes that read their body themselves, so the key is checked
before a single byte of the body is read."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status

from service.dependencies import Settings
from service.envelope import Headers, Refusal, headers_of

UNAUTHORIZED = "missing or wrong API key (send it as X-API-Key)"


def key_matches(expected: str | None, x_api_key: str | None, authorization: str) -> bool:
    """X-API-Key, or else a Bearer token, equal to ``expected`` (compared in constant time)."""
    given = x_api_key
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    return bool(expected) and given is not None and hmac.compare_digest(given.encode(), expected.encode())


def check_key(expected: str | None, headers: Headers) -> None:
    """The one key check, for FastAPI's routes and the plain predict handler alike, over the raw
    header list: open when no key is configured; otherwise 401 unless the request carries it."""
    if not expected:
        return
    raw = headers.get(b"x-api-key")
    given = None if raw is None else raw.decode("latin-1")  # header bytes, as Starlette reads them
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    if not key_matches(expected, given, authorization):
        raise Refusal(401, UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})


async def require_api_key(request: Request, settings: Settings) -> None:
    """Open when no key is configured; otherwise the key must match."""
    check_key(settings.api_key, headers_of(request.scope))


async def require_monitoring_access(request: Request, settings: Settings) -> None:
    """/v1/actuals and /v1/monitor: the key when one is set; without one, 403 unless opened."""
    if not settings.api_key:
        if settings.monitoring_open_without_api_key:
            return
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail="actuals and the monitor are off without a key: set API_KEY (and send it), or set "
            "MONITORING_OPEN_WITHOUT_API_KEY=true to let anyone who reaches the service use them",
        )
    check_key(settings.api_key, headers_of(request.scope))


async def require_admin(request: Request, settings: Settings) -> None:
    """Admin routes: 403 while no key is configured, 401 without the right one."""
    api_key = settings.api_key
    if not api_key:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="admin endpoints are off: set API_KEY to enable them"
        )
    check_key(api_key, headers_of(request.scope))
