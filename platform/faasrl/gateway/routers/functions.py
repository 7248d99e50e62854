"""Register, list, get and delete functions; invoke and pre-warm them."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse

from faasrl.gateway.auth import require_token
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import (
    ErrorOut,
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
             responses={409: {"model": ErrorOut}})
async def create_function(spec: FunctionSpec, svc: ServicesDep
                          ) -> FunctionSpec:
    """Register a new function; 409 if the name is taken (PUT replaces)."""
    if any(f.name == spec.name for f in svc.invoker.pool.functions()):
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"a function named {spec.name!r} exists; PUT replaces it")
    await _deploy(spec, svc)
    return spec


@router.put("/{name}", response_model=FunctionSpec)
async def put_function(name: str, spec: FunctionSpec, response: Response,
                       svc: ServicesDep) -> FunctionSpec:
    """Register or replace; containers of the old version retire once idle."""
    if spec.name != name:
        raise FieldError({"name": f"{spec.name!r} does not match the path's {name!r}"})
    exists = any(f.name == name for f in svc.invoker.pool.functions())
    await _deploy(spec, svc)
    response.status_code = status.HTTP_200_OK if exists else status.HTTP_201_CREATED
    return spec


@router.get("/{name}", response_model=FunctionSpec, responses={404: {"model": ErrorOut}})
async def get_function(name: str, svc: ServicesDep) -> FunctionSpec:
    return svc.invoker.pool.spec(name)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"model": ErrorOut}})
async def delete_function(name: str, svc: ServicesDep) -> Response:
    svc.invoker.pool.spec(name)
    await svc.functions.delete(name)
    svc.invoker.unregister(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{name}/invoke", response_model=InvocationOut,
             responses={202: {"model": InvocationAccepted}, 404: {"model": ErrorOut},
                        413: {"model": ErrorOut}, 429: {"model": ErrorOut},
                        503: {"model": ErrorOut}})
async def invoke(name: str, body: InvokeRequest,
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
             responses={404: {"model": ErrorOut}})
async def prewarm(name: str, body: PrewarmRequest, svc: ServicesDep
                  ) -> PrewarmResult:
    """Start containers ahead of demand until ``count`` exist (as capacity allows)."""
    started = svc.invoker.prewarm(name, body.count)
    live = sum(1 for c in svc.invoker.pool.containers()
               if c.function == name and c.state != "stopping")
    return PrewarmResult(started=started, containers=live)
