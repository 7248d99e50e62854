"""Quotas in the pool: what each namespace's tenants hold, and whether they may take more.

Pure bookkeeping for ``pool.py``, which calls it at a few points: it counts containers in and
out as their state changes, and asks before an invocation takes a container.

Who a container counts for:
- a busy or starting container counts in full (its cores, memory, GPUs and one container) for
  the namespace of every invocation it has taken since it was last idle — the tenant's
  (``Waiter.tenant``: a job's invocations count for the job's namespace, whatever namespace the
  function they run lives in); so a container shared by two namespaces' invocations (a
  function's ``max_concurrency`` above 1) counts for both, and a quota holds at every moment;
- an idle (or pre-warmed, or stopping one that nobody ran on) container counts for the
  namespace of the function that owns it: its memory, GPUs and one container, not its cores.

A namespace's ``Quota`` bounds the sums of cores, memory_mb, gpus and containers; an invocation
that would take it beyond one waits in the queue, and is refused with ``QuotaExceeded`` (429,
naming the quota) when its queue timeout passes first. A function's ``reserved_concurrency`` /
``concurrency_limit`` bound its invocations in flight (running, or claimed on a starting
container); the reservation's capacity is the pool's to set aside (``Pool._set_aside``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from faasrl.invoker.errors import QuotaExceeded
from faasrl.manifest import FunctionSpec
from faasrl.namespaces import Quota
from faasrl.resources import Resources

MICRO = 1_000_000  # cores are summed in millionths: integers add up exactly


@dataclass(frozen=True)
class Usage:
    """What a namespace's tenants hold now (see the module docstring for what counts)."""

    cores: float = 0.0
    memory_mb: int = 0
    gpus: float = 0
    containers: int = 0


def function_cap(spec: FunctionSpec) -> tuple[str, int] | None:
    """The manifest field bounding the function's invocations in flight, and its value."""
    if spec.reserved_concurrency is not None:
        return "reserved_concurrency", spec.reserved_concurrency
    if spec.concurrency_limit is not None:
        return "concurrency_limit", spec.concurrency_limit
    return None


def reserved_containers(spec: FunctionSpec) -> int:
    """Containers a function's reservation sets aside (each serves ``max_concurrency``)."""
    return math.ceil((spec.reserved_concurrency or 0) / spec.max_concurrency)


class Quotas:
    """Per namespace: its ``Quota`` and what its tenants hold, kept as running sums while any
    namespace has a quota (the pool recounts them when the first is set)."""

    def __init__(self) -> None:
        self._quotas: dict[str, Quota] = {}
        self._held: dict[str, list[int]] = {}  # [micro cores, memory_mb, micro gpus, containers]
        # Whether any namespace has a quota (else nothing is ever refused here): an attribute,
        # not a property, as the pool reads it several times per warm invocation.
        self.active = False

    def set(self, namespace: str, quota: Quota) -> None:
        if quota == Quota():
            self._quotas.pop(namespace, None)
        else:
            self._quotas[namespace] = quota
        self.active = bool(self._quotas)

    def clear(self) -> None:
        """Forget the sums (before a recount)."""
        self._held.clear()

    def quota(self, namespace: str) -> Quota:
        return self._quotas.get(namespace) or Quota()

    def count(self, namespaces: Iterable[str], need: Resources, cores: bool, sign: int) -> None:
        """Add (``sign`` +1) or take out (-1) one container of ``need`` for each namespace;
        ``cores``: whether it holds its cores in its state."""
        micro = round(need.cpu * MICRO) if cores else 0
        for ns in namespaces:
            held = self._held.get(ns)
            if held is None:
                held = self._held[ns] = [0, 0, 0, 0]
            held[0] += sign * micro
            held[1] += sign * need.memory_mb
            held[2] += sign * round(need.gpus * MICRO)
            held[3] += sign

    def usage(self, namespace: str) -> Usage:
        cores, memory_mb, gpus, containers = self._held.get(namespace, (0, 0, 0, 0))
        return Usage(cores / MICRO, memory_mb, gpus / MICRO, containers)

    def refusal(self, namespace: str, extra: Resources, containers: int) -> str | None:
        """Which of the namespace's quotas taking ``extra`` and ``containers`` more would
        exceed, as a sentence naming it; None where it fits."""
        quota = self._quotas.get(namespace)
        if quota is None or (containers == 0 and extra == Resources()):
            return None
        u = self.usage(namespace)
        over = [(name, limit, held) for name, limit, held, more in (
            ("containers", quota.containers, u.containers, containers),
            ("cores", quota.cores, u.cores, extra.cpu),
            ("memory_mb", quota.memory_mb, u.memory_mb, extra.memory_mb),
            ("gpus", quota.gpus, u.gpus, extra.gpus),
        ) if limit is not None and more > 0 and held + more > limit + 1e-9]
        if not over:
            return None
        name, limit, held = over[0]
        return f"namespace {namespace!r} is at its quota {name}={limit:g} (it holds {held:g})"

    def beyond(self, namespace: str, need: Resources) -> str | None:
        """The quota one container of ``need`` exceeds on its own (it could never start)."""
        quota = self._quotas.get(namespace)
        if quota is None:
            return None
        for name, limit, amount in (("containers", quota.containers, 1),
                                    ("cores", quota.cores, need.cpu),
                                    ("memory_mb", quota.memory_mb, need.memory_mb),
                                    ("gpus", quota.gpus, need.gpus)):
            if limit is not None and amount > limit + 1e-9:
                return (f"namespace {namespace!r} has the quota {name}={limit:g}: one container "
                        f"needs {amount:g}")
        return None


def refused(reason: str, waited_s: float | None = None) -> QuotaExceeded:
    """The error for an invocation a quota kept out (``waited_s``: its queue timeout)."""
    if waited_s is None:
        return QuotaExceeded(reason)
    return QuotaExceeded(f"{reason}; no room within the queue timeout of {waited_s:g} s",
                         waited=True)
