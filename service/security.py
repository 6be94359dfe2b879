"""Optional API key: when configured, predict and admin routes need it (X-API-Key or Bearer)."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


async def require_api_key(request: Request) -> None:
    expected = request.app.state.settings.api_key
    if not expected:
        return
    given = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization", "")
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong API key (send it as X-API-Key)",
            headers={"WWW-Authenticate": "Bearer"},
        )
