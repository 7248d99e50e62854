"""Bearer-token auth for every /v1 route, on when the gateway has a token.

Dependencies here are ``async def`` on purpose: FastAPI runs plain ``def`` ones in a thread pool,
which costs a thread hop per request on the invocation hot path.
"""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, status

from faasrl.config import Settings


def authorized(settings: Settings, authorization: str) -> bool:
    """Whether an ``Authorization`` header's value lets a request in."""
    token = settings.token
    if token is None:
        return True
    scheme, _, value = authorization.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(
        value.strip().encode(), token.get_secret_value().encode())


async def require_token(request: Request) -> None:
    if not authorized(request.app.state.settings, request.headers.get("authorization", "")):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong bearer token",
                            headers={"WWW-Authenticate": "Bearer"})
