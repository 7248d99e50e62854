"""Invocation records: one by id (async invocations are polled here) and recent ones."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from faasrl.gateway.auth import authenticate
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

router = APIRouter(prefix="/v1/invocations", tags=["invocations"],
                   dependencies=[Depends(authenticate)],
                   responses={401: {"model": ErrorOut}, **INVALID_INPUT, **REDIS_ERRORS})


@router.get("/{invocation_id}", response_model=InvocationOut,
            responses={404: {"model": ErrorOut}})
async def get_invocation(invocation_id: InvocationId, svc: ServicesDep
                         ) -> dict[str, Any]:
    rec = await svc.records.get(invocation_id)
    if rec is None:
        raise HTTPException(404, invocations.not_found(svc, invocation_id))
    return rec


@router.get("", response_model=list[InvocationOut])
async def list_invocations(
        svc: ServicesDep,
        function: Annotated[str | None, Query(pattern=FUNCTION_NAME,
                                              description="only this function's")] = None,
        status: Annotated[FinalStatus | None,
                          Query(description="only those that ended so")] = None,
        limit: Annotated[int, Query(ge=1, le=INDEX_LEN)] = 50) -> list[dict[str, Any]]:
    """The most recent finished invocations, newest first."""
    return await invocations.recent(svc, function, limit, status)
