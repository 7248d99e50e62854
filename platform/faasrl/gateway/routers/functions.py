"""Register, list, get and delete functions; invoke and pre-warm them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse

from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import (
    BODY_ERRORS,
    INVALID_INPUT,
    INVOKE_BODY_ERRORS,
    REDIS_ERRORS,
    ErrorOut,
    FunctionName,
    FunctionStatsOut,
    FunctionUpdate,
    InvocationAccepted,
    InvocationOut,
    InvokeRequest,
    PrewarmRequest,
    PrewarmResult,
)
from faasrl.gateway.services import ServicesDep, functions, invocations
from faasrl.gateway.services.versions import resolve
from faasrl.invoker.records import INDEX_LEN
from faasrl.manifest import FunctionSpec, renamed
from faasrl.namespaces import qualify

router = APIRouter(prefix="/v1/functions", tags=["functions"],
                   dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, **INVALID_INPUT})


@router.get("", response_model=list[FunctionSpec])
async def list_functions(svc: ServicesDep, principal: PrincipalDep) -> list[FunctionSpec]:
    """The caller's namespace's functions."""
    return functions.listed(svc, principal.namespace)


@router.post("", response_model=FunctionSpec, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorOut}, **BODY_ERRORS, **REDIS_ERRORS})
async def create_function(spec: FunctionSpec, svc: ServicesDep, principal: PrincipalDep
                          ) -> FunctionSpec:
    """Register a new function; 409 if the name is taken (PUT replaces)."""
    qualified = renamed(spec, qualify(principal.namespace, spec.name))
    if functions.is_registered(svc, qualified.name):
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"a function named {spec.name!r} exists; PUT replaces it")
    await functions.deploy(svc, qualified)
    return spec


@router.put("/{name}", response_model=FunctionSpec,
            responses={200: {"description": "replaced"},
                        201: {"model": FunctionSpec, "description": "registered"},
                        **BODY_ERRORS, **REDIS_ERRORS})
async def put_function(name: FunctionName, body: FunctionUpdate, response: Response,
                       svc: ServicesDep, principal: PrincipalDep) -> FunctionSpec:
    """Register (201) or replace (200); containers of the old version retire once idle. The
    body's ``name`` may be left out; given, it must be the path's."""
    if body.name not in (None, name):
        raise FieldError({"name": f"{body.name!r} does not match the path's {name!r}"})
    spec = body.named(name)
    replaced = await functions.deploy(svc, renamed(spec, qualify(principal.namespace, name)))
    response.status_code = status.HTTP_200_OK if replaced else status.HTTP_201_CREATED
    return spec


@router.get("/{name}", response_model=FunctionSpec, responses={404: {"model": ErrorOut}})
async def get_function(name: FunctionName, svc: ServicesDep, principal: PrincipalDep
                       ) -> FunctionSpec:
    return renamed(svc.invoker.spec(qualify(principal.namespace, name)), name)


@router.get("/{name}/stats", response_model=FunctionStatsOut,
            responses={404: {"model": ErrorOut}, **REDIS_ERRORS})
async def function_stats(
        name: FunctionName, svc: ServicesDep, principal: PrincipalDep,
        window: Annotated[int, Query(ge=1, le=INDEX_LEN, description="the most recent "
                                     "finished invocations to sum up")] = 200
) -> FunctionStatsOut:
    """Warm and cold invocations, errors, p50/p99 run time and latency over the recent ones,
    and the containers by state now."""
    return await functions.stats(svc, qualify(principal.namespace, name), window)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses={404: {"model": ErrorOut}, **REDIS_ERRORS})
async def delete_function(name: FunctionName, svc: ServicesDep, principal: PrincipalDep
                          ) -> Response:
    await functions.delete(svc, qualify(principal.namespace, name))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{name}/invoke", response_model=InvocationOut,
             responses={202: {"model": InvocationAccepted}, 404: {"model": ErrorOut},
                        410: {"model": ErrorOut, "description": "deleted while it waited"},
                        429: {"model": ErrorOut}, **INVOKE_BODY_ERRORS,
                        503: {**REDIS_ERRORS[503], "description": "no container within the "
                              "queue timeout (QueueTimeout), or Redis is unreachable"}})
async def invoke(name: FunctionName, body: InvokeRequest,
                 svc: ServicesDep, principal: PrincipalDep,
                 mode: Annotated[Literal["sync", "async"],
                                 Query(description="async answers 202")] = "sync",
                 qualifier: Annotated[str | None, Query(
                     min_length=1, max_length=128,
                     description="$LATEST (the default), a published version or an alias"
                 )] = None) -> Response:
    """Invoke a function. Sync answers with the invocation's record (its ``status`` says whether
    the handler succeeded); async answers 202 with an id to poll at ``/v1/invocations/{id}``."""
    name = qualify(principal.namespace, name)
    if mode == "sync":  # gateway/fast_invoke.py answers most of these before routing
        return Response(await invocations.run(svc, name, body, qualifier),
                        media_type="application/json")
    spec = svc.invoker.spec(name)
    version = None if qualifier is None else resolve(svc, name, qualifier)
    invocation_id = await invocations.accept(svc, spec, body.args, timeout_s=body.timeout_s,
                                             affinity=body.affinity, version=version)
    return JSONResponse({"id": invocation_id, "status": "queued"}, status_code=202,
                        headers={"Location": f"/v1/invocations/{invocation_id}"})


@router.post("/{name}/prewarm", response_model=PrewarmResult,
             responses={404: {"model": ErrorOut}, **BODY_ERRORS})
async def prewarm(name: FunctionName, body: PrewarmRequest, svc: ServicesDep,
                  principal: PrincipalDep) -> PrewarmResult:
    """Start containers ahead of demand until ``count`` exist (as capacity allows)."""
    return functions.prewarm(svc, qualify(principal.namespace, name), body.count)
