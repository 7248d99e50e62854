"""Liveness and Prometheus metrics; outside /v1 and so without auth, like most exporters."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

import faasrl
from faasrl.gateway.schemas import HealthOut
from faasrl.gateway.services import ServicesDep, invocations

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
async def metrics(svc: ServicesDep) -> Response:
    return Response(generate_latest(svc.metrics), media_type=CONTENT_TYPE_LATEST)
