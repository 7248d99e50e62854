"""The node as the invoker sees it: capacity, and containers per function with their state."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends

from faasrl.gateway.auth import require_token
from faasrl.gateway.schemas import ClusterOut, ContainerOut, ErrorOut, FunctionPoolOut, ResourcesOut
from faasrl.gateway.services import ServicesDep
from faasrl.invoker.resources import Resources

router = APIRouter(prefix="/v1/cluster", tags=["cluster"],
                   dependencies=[Depends(require_token)], responses={401: {"model": ErrorOut}})


def _resources(r: Resources) -> ResourcesOut:
    return ResourcesOut(cpu=r.cpu, memory_mb=r.memory_mb, gpus=r.gpus)


@router.get("", response_model=ClusterOut)
async def cluster(svc: ServicesDep) -> ClusterOut:
    invoker, pool, now = svc.invoker, svc.invoker.pool, time.monotonic()
    functions = {s.name: FunctionPoolOut(queued=pool.queued(s.name), containers=[])
                 for s in pool.functions()}
    for c in sorted(pool.containers(), key=lambda c: c.created_at):
        handle = invoker.handle(c.id)
        stats = invoker.backend.stats(handle) if handle else None
        out = ContainerOut(
            id=c.id, state=c.state.value, inflight=c.inflight, served=c.served,
            age_s=now - c.created_at,
            idle_s=None if c.idle_since is None else now - c.idle_since,
            gpus=list(c.gpus), pid=handle.pid if handle else None,
            endpoint=f"{handle.host}:{handle.port}" if handle else None,
            memory_mb=stats.memory_mb if stats else None, cpu_s=stats.cpu_s if stats else None)
        functions.setdefault(c.function, FunctionPoolOut(queued=0, containers=[]))
        functions[c.function].containers.append(out)
    return ClusterOut(backend=invoker.backend.name, capacity=_resources(pool.capacity),
                      reserved=_resources(pool.reserved),
                      free=_resources(pool.capacity - pool.reserved), functions=functions)
