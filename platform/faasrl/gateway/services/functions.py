"""Function registrations: deploy, delete and pre-warm, and what a starting gateway registers."""

from __future__ import annotations

import logging
import math
from collections import Counter
from pathlib import Path
from typing import Any

from faasrl.code_archive import NO_ARCHIVE
from faasrl.gateway.errors import FieldError
from faasrl.gateway.schemas import FunctionStatsOut, PrewarmResult
from faasrl.gateway.services import Services, versions
from faasrl.invoker import Invoker, State
from faasrl.invoker.errors import CapacityError
from faasrl.invoker.registry import FunctionRegistry
from faasrl.manifest import (
    MANIFEST_NAMES,
    FunctionSpec,
    ManifestError,
    load_manifest,
    renamed,
)
from faasrl.namespaces import local_name, namespace_of, owns

log = logging.getLogger(__name__)


def is_registered(svc: Services, name: str) -> bool:
    return any(f.name == name for f in svc.invoker.functions())


def listed(svc: Services, namespace: str) -> list[FunctionSpec]:
    """``namespace``'s functions under their bare names, by name."""
    return sorted((renamed(s, local_name(s.name)) for s in svc.invoker.functions()
                   if owns(namespace, s.name)), key=lambda s: s.name)


async def deploy(svc: Services, spec: FunctionSpec) -> bool:
    """Register ``spec`` (kept in Redis for the next start) or replace the function of its name;
    returns whether it replaced one. A manifest this node could never run is a 422 naming the
    fields, before anything is saved."""
    fields = svc.invoker.shortfall(spec)
    if spec.code_sha256 and not await svc.code.owned(namespace_of(spec.name), spec.code_sha256):
        fields["code_sha256"] = NO_ARCHIVE
    if fields:
        raise FieldError(fields)
    replaced = is_registered(svc, spec.name)
    await svc.functions.save(spec)
    svc.invoker.register(spec)
    return replaced


async def delete(svc: Services, name: str) -> None:
    """Forget a function; its waiting invocations fail, its containers retire, its versions,
    aliases and dead letters go."""
    svc.invoker.spec(name)  # FunctionNotFound (404) before Redis is touched
    await svc.functions.delete(name)
    svc.invoker.unregister(name)
    await versions.forget(svc, name)
    await svc.dead_letters.clear(name)


def prewarm(svc: Services, name: str, count: int) -> PrewarmResult:
    svc.memory.admit("pre-warming")
    started = svc.invoker.prewarm(name, count)
    live = sum(1 for c in svc.invoker.containers()
               if c.function == name and c.state != State.STOPPING)
    return PrewarmResult(started=started, containers=live)


async def stats(svc: Services, name: str, window: int) -> FunctionStatsOut:
    """``name``'s ``window`` most recent finished invocations summed up, and its containers
    by state now (a dashboard's row; Prometheus' ``/metrics`` has the totals since start)."""
    svc.invoker.spec(name)  # FunctionNotFound (404) before Redis is touched
    records = [r for r in await svc.records.recent(name, window)
               if r["namespace"] == namespace_of(name)]  # not other namespaces' jobs' calls
    states = Counter(c.state.value for c in svc.invoker.containers() if c.function == name)
    cold = sum(1 for r in records if r["cold"])
    runs = sorted(r["run_s"] for r in records)
    latencies = sorted(r["queue_s"] + r["run_s"] for r in records)
    return FunctionStatsOut(
        function=local_name(name), invocations=len(records), warm=len(records) - cold, cold=cold,
        errors=sum(1 for r in records if r["status"] == "error"),
        timeouts=sum(1 for r in records if r["status"] == "timeout"),
        run_p50_s=_quantile(runs, 0.50), run_p99_s=_quantile(runs, 0.99),
        latency_p50_s=_quantile(latencies, 0.50), latency_p99_s=_quantile(latencies, 0.99),
        billed_ms=sum(r["billed_ms"] for r in records), queued=svc.invoker.queued(name),
        containers={state.value: states[state.value] for state in State})


def _quantile(ordered: list[Any], q: float) -> Any:
    """The nearest-rank ``q`` quantile of sorted values (one of them, never interpolated);
    None for none."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None


async def restore(invoker: Invoker, registrations: FunctionRegistry,
                  builtins: Path | None) -> None:
    """At start: register what was registered before, then each built-in function (a folder
    of ``builtins`` with a manifest) not registered yet. One that does not fit is logged and
    skipped, so one bad manifest cannot keep the gateway down."""
    for spec in await registrations.load():
        try:
            invoker.register(spec)
        except CapacityError as exc:
            log.error("function %s does not fit this node: %s", spec.name, exc.message)
    if builtins is None or not builtins.is_dir():
        return
    known = {spec.name for spec in invoker.functions()}
    for path in sorted(builtins.iterdir()):
        if not any((path / name).is_file() for name in MANIFEST_NAMES):
            continue
        try:
            spec = load_manifest(path)
            if spec.name in known:
                continue
            invoker.register(spec)
        except (ManifestError, CapacityError) as exc:
            log.error("built-in function in %s not registered: %s", path, exc)
            continue
        await registrations.save(spec)
