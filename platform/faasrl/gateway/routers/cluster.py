"""The node as the invoker sees it: capacity, and containers per function with their state."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from faasrl.gateway.auth import PrincipalDep, authenticate
from faasrl.gateway.schemas import ClusterOut, ErrorOut
from faasrl.gateway.services import ServicesDep
from faasrl.gateway.services.cluster import snapshot

router = APIRouter(prefix="/v1/cluster", tags=["cluster"],
                   dependencies=[Depends(authenticate)], responses={401: {"model": ErrorOut}})


@router.get("", response_model=ClusterOut)
async def cluster(svc: ServicesDep, principal: PrincipalDep) -> ClusterOut:
    """The caller's namespace's functions and containers; the node's capacity."""
    return snapshot(svc.invoker, principal.namespace)
