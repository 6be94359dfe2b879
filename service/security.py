"""The API key. When API_KEY is set, predict, the model description and admin routes need it
(X-API-Key or Bearer); admin routes are off altogether while no key is configured, so a service
started without one cannot be reloaded or inspected by strangers.

These are route dependencies on routes that read their body themselves, so the key is checked
before a single byte of the body is read."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


def _given_key(request: Request) -> str | None:
    given = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization", "")
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    return given


def key_is_valid(request: Request) -> bool:
    expected = request.app.state.settings.api_key
    given = _given_key(request)
    return bool(expected) and given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _unauthorized() -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail="missing or wrong API key (send it as X-API-Key)",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def require_api_key(request: Request) -> None:
    """Open when no key is configured; otherwise the key must match."""
    if request.app.state.settings.api_key and not key_is_valid(request):
        raise _unauthorized()


async def require_admin(request: Request) -> None:
    """Admin routes: 403 while no key is configured, 401 without the right one."""
    if not request.app.state.settings.api_key:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="admin endpoints are off: set API_KEY to enable them"
        )
    if not key_is_valid(request):
        raise _unauthorized()
