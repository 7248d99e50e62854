"""Invocation records: one by id (async invocations are polled here) and recent ones."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.schemas import (
    INVALID_INPUT,
    REDIS_ERRORS,
    ErrorOut,
    InvocationId,
    InvocationOut,
)
from faasrl.gateway.services import ServicesDep, invocations
from faasrl.invoker.records import INDEX_LEN, FinalStatus
from faasrl.manifest import FUNCTION_NAME
from faasrl.namespaces import qualify

router = APIRouter(prefix="/v1/invocations", tags=["invocations"],
                   dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, **INVALID_INPUT, **REDIS_ERRORS})


@router.get("/{invocation_id}", response_model=InvocationOut,
            responses={404: {"model": ErrorOut}})
async def get_invocation(invocation_id: InvocationId, svc: ServicesDep,
                         principal: PrincipalDep) -> dict[str, Any]:
    """An invocation of the caller's namespace (made in it, or by one of its jobs)."""
    rec = invocations.visible(await svc.records.get(invocation_id), principal.namespace)
    if rec is None:
        raise HTTPException(404, invocations.not_found(svc, invocation_id))
    return invocations.shown(rec)


@router.get("", response_model=list[InvocationOut])
async def list_invocations(
        svc: ServicesDep, principal: PrincipalDep,
        function: Annotated[str | None, Query(pattern=FUNCTION_NAME,
                                              description="only this function's")] = None,
        status: Annotated[FinalStatus | None,
                          Query(description="only those that ended so")] = None,
        limit: Annotated[int, Query(ge=1, le=INDEX_LEN)] = 50) -> list[dict[str, Any]]:
    """The most recent finished invocations of the caller's namespace's functions, newest
    first."""
    ns = principal.namespace
    return [invocations.shown(r) for r in await invocations.recent(
        svc, ns, function and qualify(ns, function), limit, status)]
