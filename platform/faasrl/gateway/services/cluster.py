"""The node as the invoker sees it: capacity, and each function's queue and containers."""

from __future__ import annotations

import time

from faasrl.gateway.schemas import (
    ClusterOut,
    ContainerOut,
    FunctionPoolOut,
    ResourcesOut,
    StemCellsOut,
)
from faasrl.invoker import Invoker
from faasrl.namespaces import local_name, owns
from faasrl.resources import Resources


def snapshot(invoker: Invoker, namespace: str) -> ClusterOut:
    """Every function of ``namespace`` (and any whose containers outlive it), oldest container
    first, with what the backend measures of each, under their bare names; the node's
    capacity, stem cells and zygote, which every namespace shares."""
    now = time.monotonic()
    functions = {local_name(s.name): FunctionPoolOut(queued=invoker.queued(s.name),
                                                     containers=[])
                 for s in invoker.functions() if owns(namespace, s.name)}
    for c in invoker.containers():
        if not owns(namespace, c.function):
            continue
        stats = invoker.container_stats(c.id)
        out = ContainerOut(
            id=c.id, state=c.state.value, inflight=c.inflight, served=c.served,
            age_s=now - c.created_at,
            idle_s=None if c.idle_since is None else now - c.idle_since,
            gpus=list(c.gpus), pid=c.handle.pid if c.handle else None,
            node=c.handle.node if c.handle else None,
            endpoint=f"{c.handle.host}:{c.handle.port}" if c.handle else None,
            memory_mb=stats.memory_mb if stats else None, cpu_s=stats.cpu_s if stats else None)
        pool = functions.setdefault(local_name(c.function),
                                    FunctionPoolOut(queued=0, containers=[]))
        pool.containers.append(out)
    capacity, reserved = invoker.capacity, invoker.reserved
    return ClusterOut(backend=invoker.backend_name, capacity=_resources(capacity),
                      reserved=_resources(reserved), free=_resources(capacity - reserved),
                      functions=functions,
                      stem_cells={image: StemCellsOut(**counts)
                                  for image, counts in invoker.stem_cells().items()},
                      zygote=invoker.zygote_state(),
                      zygote_not_preloaded=invoker.zygote_not_preloaded())


def _resources(r: Resources) -> ResourcesOut:
    return ResourcesOut(cpu=r.cpu, memory_mb=r.memory_mb, gpus=r.gpus)
