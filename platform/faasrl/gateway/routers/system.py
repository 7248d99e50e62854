"""Liveness and Prometheus metrics; outside /v1, so a scraper needs no key, like most exporters.

``/metrics`` answers a scrape without a key as it always did while there was one namespace:
``default``'s series (and the node's). The root key sees every namespace's series; a
namespace's key sees its own (``services/metrics.py``); a wrong key is a 401.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from redis.exceptions import RedisError

import faasrl
from faasrl.gateway.auth import NAMESPACE_HEADER, identify, require_namespace
from faasrl.gateway.schemas import HealthOut
from faasrl.gateway.services import ServicesDep, invocations
from faasrl.gateway.services.metrics import scrape
from faasrl.namespaces import DEFAULT, Principal

router = APIRouter(tags=["system"])


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def healthz(svc: ServicesDep) -> JSONResponse:
    try:
        await svc.redis.ping()
        redis_state, code = "ok", 200
    except RedisError as exc:
        redis_state, code = f"unreachable: {exc}", 503
    body = HealthOut(status="ok" if code == 200 else "degraded", version=faasrl.__version__,
                     redis=redis_state, memory=svc.memory.summary(),
                     records=invocations.retention(svc))
    return JSONResponse(body.model_dump(), status_code=code)


@router.get("/metrics", response_class=Response)
async def metrics(request: Request, svc: ServicesDep) -> Response:
    """Every series for the root key (``X-Faasrl-Namespace``: one namespace's), a namespace's
    own for its keys, ``default``'s for a scrape without a key."""
    authorization = request.headers.get("authorization")
    namespace = request.headers.get(NAMESPACE_HEADER)
    principal = identify(svc.settings, svc.keys, authorization or "", namespace) \
        if authorization or svc.settings.token is None else Principal(DEFAULT, "read")
    if principal is None:
        raise HTTPException(401, "wrong or revoked bearer key",
                            headers={"WWW-Authenticate": "Bearer"})
    require_namespace(svc.keys, principal, namespace)
    return Response(scrape(svc, principal, all_namespaces=not namespace),
                    media_type=CONTENT_TYPE_LATEST)
