"""Register, list, get and delete functions; invoke and pre-warm them."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse

from faasrl.gateway.auth import require_token
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import (
    BODY_ERRORS,
    REDIS_ERRORS,
    ErrorOut,
    FunctionName,
    FunctionUpdate,
    InvocationAccepted,
    InvocationOut,
    InvokeRequest,
    PrewarmRequest,
    PrewarmResult,
)
from faasrl.gateway.services import Services, ServicesDep
from faasrl.invoker.errors import FunctionNotFound, InvokerError
from faasrl.invoker.invoker import new_invocation_id
from faasrl.invoker.pool import need_of
from faasrl.invoker.records import InvocationRecord
from faasrl.manifest import FunctionSpec

router = APIRouter(prefix="/v1/functions", tags=["functions"],
                   dependencies=[Depends(require_token)],
                   responses={401: {"model": ErrorOut}, 422: {"model": ErrorOut}})


async def _check_deployable(spec: FunctionSpec, svc: Services) -> None:
    fields = svc.invoker.pool.capacity.shortfall(need_of(spec))
    if spec.code_sha256 and not await svc.code.exists(spec.code_sha256):
        fields["code_sha256"] = "no uploaded code archive has this digest (POST /v1/code)"
    fields.update(svc.invoker.backend.check(spec))
    if fields:
        raise FieldError(fields)


async def _deploy(spec: FunctionSpec, svc: Services) -> None:
    await _check_deployable(spec, svc)
    await svc.functions.save(spec)
    svc.invoker.register(spec)


@router.get("", response_model=list[FunctionSpec])
async def list_functions(svc: ServicesDep) -> list[FunctionSpec]:
    return sorted(svc.invoker.pool.functions(), key=lambda s: s.name)


@router.post("", response_model=FunctionSpec, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorOut}, **BODY_ERRORS, **REDIS_ERRORS})
async def create_function(spec: FunctionSpec, svc: ServicesDep
                          ) -> FunctionSpec:
    """Register a new function; 409 if the name is taken (PUT replaces)."""
    if any(f.name == spec.name for f in svc.invoker.pool.functions()):
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"a function named {spec.name!r} exists; PUT replaces it")
    await _deploy(spec, svc)
    return spec


@router.put("/{name}", response_model=FunctionSpec,
            responses={200: {"description": "replaced"},
                        201: {"model": FunctionSpec, "description": "registered"},
                        **BODY_ERRORS, **REDIS_ERRORS})
async def put_function(name: FunctionName, body: FunctionUpdate, response: Response,
                       svc: ServicesDep) -> FunctionSpec:
    """Register (201) or replace (200); containers of the old version retire once idle. The
    body's ``name`` may be left out; given, it must be the path's."""
    if body.name not in (None, name):
        raise FieldError({"name": f"{body.name!r} does not match the path's {name!r}"})
    spec = body.named(name)
    exists = any(f.name == name for f in svc.invoker.pool.functions())
    await _deploy(spec, svc)
    response.status_code = status.HTTP_200_OK if exists else status.HTTP_201_CREATED
    return spec


@router.get("/{name}", response_model=FunctionSpec, responses={404: {"model": ErrorOut}})
async def get_function(name: FunctionName, svc: ServicesDep) -> FunctionSpec:
    return svc.invoker.pool.spec(name)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"model": ErrorOut}, **REDIS_ERRORS})
async def delete_function(name: FunctionName, svc: ServicesDep) -> Response:
    svc.invoker.pool.spec(name)
    await svc.functions.delete(name)
    svc.invoker.unregister(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{name}/invoke", response_model=InvocationOut,
             responses={202: {"model": InvocationAccepted}, 404: {"model": ErrorOut},
                        410: {"model": ErrorOut, "description": "deleted while it waited"},
                        429: {"model": ErrorOut}, **BODY_ERRORS,
                        503: {**REDIS_ERRORS[503], "description": "no container within the "
                              "queue timeout (QueueTimeout), or Redis is unreachable"}})
async def invoke(name: FunctionName, body: InvokeRequest,
                 svc: ServicesDep,
                 mode: Annotated[Literal["sync", "async"],
                                 Query(description="async answers 202")] = "sync") -> Response:
    """Invoke a function. Sync answers with the invocation's record (its ``status`` says whether
    the handler succeeded); async answers 202 with an id to poll at ``/v1/invocations/{id}``."""
    if mode == "sync":
        rec = await svc.invoker.invoke(name, body.args, timeout_s=body.timeout_s,
                                       affinity=body.affinity)
        return Response(rec.to_json(), media_type="application/json")
    spec = svc.invoker.pool.spec(name)
    rec = InvocationRecord(new_invocation_id(), name, memory_mb=spec.memory_mb,
                           backend=svc.invoker.backend.name, requested_at=time.time())
    await svc.records.put_now(rec)
    svc.spawn(_invoke_async(svc, name, body, rec.id))
    return JSONResponse({"id": rec.id, "status": "queued"}, status_code=202,
                        headers={"Location": f"/v1/invocations/{rec.id}"})


async def _invoke_async(svc: Services, name: str, body: InvokeRequest, invocation_id: str
                        ) -> None:
    try:
        await svc.invoker.invoke(name, body.args, timeout_s=body.timeout_s,
                                 invocation_id=invocation_id, on_running=svc.records.put,
                                 affinity=body.affinity)
    except FunctionNotFound as exc:
        rec = InvocationRecord(invocation_id, name, status="error", finished_at=time.time(),
                               error={"type": exc.kind, "message": exc.message})
        svc.records.put(rec)
    except InvokerError:
        pass  # the invoker wrote the refusal into the record


@router.post("/{name}/prewarm", response_model=PrewarmResult,
             responses={404: {"model": ErrorOut}, **BODY_ERRORS})
async def prewarm(name: FunctionName, body: PrewarmRequest, svc: ServicesDep
                  ) -> PrewarmResult:
    """Start containers ahead of demand until ``count`` exist (as capacity allows)."""
    started = svc.invoker.prewarm(name, body.count)
    live = sum(1 for c in svc.invoker.pool.containers()
               if c.function == name and c.state != "stopping")
    return PrewarmResult(started=started, containers=live)
