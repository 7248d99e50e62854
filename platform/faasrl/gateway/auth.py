"""Bearer-token auth for every /v1 route, on when the gateway has a token.

Dependencies here are ``async def`` on purpose: FastAPI runs plain ``def`` ones in a thread pool,
which costs a thread hop per request on the invocation hot path.
"""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, status


async def require_token(request: Request) -> None:
    token = request.app.state.settings.token
    if token is None:
        return
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(
            value.strip().encode(), token.get_secret_value().encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong bearer token",
                            headers={"WWW-Authenticate": "Bearer"})
