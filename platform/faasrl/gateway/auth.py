"""Who a request acts as (its ``Principal``), for every /v1 route.

The gateway's own token (``FAASRL_TOKEN``) is the root key: the admin of namespace ``default``,
who may act in any other namespace by naming it in ``X-Faasrl-Namespace``. With no token, every
request is root (auth off, as before namespaces). Any other bearer value must be a live API key
(``gateway/keys.py``), which acts in its own namespace only. A ``read`` key may only read.

Dependencies here are ``async def`` on purpose: FastAPI runs plain ``def`` ones in a thread pool,
which costs a thread hop per request on the invocation hot path.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from faasrl.config import Settings
from faasrl.gateway.keys import KeyStore
from faasrl.namespaces import ROOT, Principal

NAMESPACE_HEADER = "x-faasrl-namespace"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # what a read key may send


def identify(settings: Settings, keys: KeyStore | None, authorization: str,
             namespace: str | None = None) -> Principal | None:
    """The principal an ``Authorization`` header's value is, or None (refused). ``namespace``:
    the namespace header's value, honoured for root only (a key acts in its own)."""
    token = settings.token
    if token is None:
        principal: Principal | None = ROOT
    else:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        value = value.strip()
        if secrets.compare_digest(value.encode(), token.get_secret_value().encode()):
            principal = ROOT
        else:
            principal = keys.principal(value) if keys is not None else None
    if principal is not None and principal.root and namespace:
        return Principal(namespace, principal.role, principal.key_id, root=True)
    return principal


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail,
                         headers={"WWW-Authenticate": "Bearer"})


def require_namespace(keys: KeyStore | None, principal: Principal, namespace: str | None
                      ) -> None:
    """404 for a root request whose namespace header names no namespace."""
    if namespace and principal.root and (keys is None or keys.namespace(namespace) is None):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no namespace named {namespace!r}")


async def authenticate(request: Request) -> Principal:
    """The request's principal; 401 for a missing, wrong or revoked key, 403 for a write by a
    read key, 404 for a namespace header naming none."""
    services = getattr(request.app.state, "services", None)
    keys = services.keys if services is not None else None
    namespace = request.headers.get(NAMESPACE_HEADER)
    principal = identify(request.app.state.settings, keys,
                         request.headers.get("authorization", ""), namespace)
    if principal is None:
        raise _unauthorized("missing, wrong or revoked bearer key")
    require_namespace(keys, principal, namespace)
    if request.method not in READ_METHODS and not principal.can_write:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"key {principal.key_id} may only read (role 'read')")
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]
