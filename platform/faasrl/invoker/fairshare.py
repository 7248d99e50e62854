"""Fair sharing of contended capacity between tenants: the pool's accounting and ordering key.

The scheme is hierarchical fair share by decayed usage (Slurm's and HTCondor's fair-share, the
virtual time of weighted fair queuing with a memory that fades):

- Usage: every running invocation charges its tenant (and the tenant's namespace) for the
  seconds it holds its container, each second weighted by the container's dominant share of the
  node (its largest fraction of the node's cores, memory or GPUs: Dominant Resource Fairness),
  so a learner holding a GPU costs more than an actor holding one core. Usage decays with a
  half-life of ``HALF_LIFE_S``: what counts is what a tenant got recently.
- Order: namespaces share first, equally: the waiter whose namespace has the least usage goes
  first; within a namespace, the tenant (a job, or a plain invocation's function) with the least
  usage per unit of ``weight`` (a job's priority); then arrival. A retry goes before all.
  Served this way, tenants that keep waiting get capacity in proportion to their weights: a job
  of weight 2 beside one of weight 1 ends with twice the usage before the other comes first.

Pure like the pool: the caller's clock comes in, nothing sleeps or does I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from math import exp
from typing import TypeVar

from faasrl.invoker.tenant import Tenant

HALF_LIFE_S = 20.0  # usage older than this counts half: the window fairness is judged over
_RATE = math.log(2) / HALF_LIFE_S
_MEAN_LIFE = 1.0 / _RATE
_ACTIVE = 1e-3  # a tenant whose usage fell below this share of the total no longer contends
_GONE = 1e-6  # share-seconds: usage faded this far is forgotten
T = TypeVar("T")


@dataclass(slots=True)
class Usage:
    """Decayed share-seconds held, and the share its running invocations hold now."""

    value: float = 0.0
    running: float = 0.0  # the dominant shares of its running invocations, summed
    at: float = 0.0  # when ``value`` was last brought up to date

    def advance(self, now: float) -> float:
        """Bring ``value`` to ``now``: decay it and add what ran since (the exact integral of
        a decaying charge at the running rate)."""
        dt = now - self.at
        if dt > 0:
            decay = exp(-_RATE * dt)
            self.value = self.value * decay + self.running * (1.0 - decay) * _MEAN_LIFE
            self.at = now
        return self.value


@dataclass(frozen=True, slots=True)
class Share:
    """A tenant's part of the node's recent usage, and the part it is entitled to."""

    got: float  # its fraction of all tenants' recent usage
    fair: float  # its entitlement among the tenants that contend now


class FairShare:
    """Usage per tenant and per namespace, and the order waiters are served in."""

    def __init__(self) -> None:
        self._tenants: dict[str, Usage] = {}
        self._namespaces: dict[str, Usage] = {}
        self._weights: dict[str, tuple[str, float]] = {}  # tenant key -> (namespace, weight)

    def start(self, tenant: Tenant, share: float, now: float) -> None:
        """An invocation of ``tenant`` holding ``share`` of the node starts running."""
        self._charge(tenant, share, now)

    def stop(self, tenant: Tenant, share: float, now: float) -> None:
        """It stopped running (finished, or its container went)."""
        self._charge(tenant, -share, now)

    def _charge(self, tenant: Tenant, rate: float, now: float) -> None:
        """Change what ``tenant`` (and its namespace) is charged per second from ``now`` on.
        On the warm path (two calls per invocation): no allocation once a tenant is known."""
        own = self._tenants.get(tenant.key)
        if own is None:
            own = self._tenants[tenant.key] = Usage(at=now)
            self._weights[tenant.key] = (tenant.namespace, tenant.weight)
        ns = self._namespaces.get(tenant.namespace)
        if ns is None:
            ns = self._namespaces[tenant.namespace] = Usage(at=now)
        own.advance(now)
        own.running = max(0.0, own.running + rate)
        ns.advance(now)
        ns.running = max(0.0, ns.running + rate)

    def key(self, tenant: Tenant, now: float) -> tuple[float, float]:
        """Where ``tenant``'s first waiter goes in line: its namespace's usage, then its own
        per unit of weight (the least first)."""
        ns, own = self._namespaces.get(tenant.namespace), self._tenants.get(tenant.key)
        return (ns.advance(now) if ns is not None else 0.0,
                (own.advance(now) if own is not None else 0.0) / tenant.weight)

    def order(self, waiting: Iterable[tuple[T, Tenant, float]], now: float) -> list[T]:
        """``waiting`` (item, its tenant, the dominant share it would hold), in the order to
        serve them. Each next one is the head of the tenant with the least usage per unit of
        weight, within the namespace with the least usage; each item taken counts as a second
        of what it would hold to its tenant and namespace (WFQ's finish tags), so one pass over
        a queue interleaves tenants by weight instead of serving one tenant's whole backlog
        first. Ties keep the order given."""
        lines: dict[str, dict[str, deque[tuple[int, T, float]]]] = {}
        ns_tag: dict[str, float] = {}
        tenant_tag: dict[str, float] = {}
        weight: dict[str, float] = {}
        for i, (item, tenant, cost) in enumerate(waiting):
            ns, key = tenant.namespace, tenant.key
            if ns not in ns_tag:
                ns_tag[ns] = u.advance(now) if (u := self._namespaces.get(ns)) else 0.0
            if key not in tenant_tag:
                own = u.advance(now) if (u := self._tenants.get(key)) else 0.0
                tenant_tag[key], weight[key] = own / tenant.weight, tenant.weight
            lines.setdefault(ns, {}).setdefault(key, deque()).append((i, item, cost))
        out: list[T] = []
        while lines:
            ns = min(lines, key=lambda n: (ns_tag[n], min(q[0][0] for q in lines[n].values())))
            tenants = lines[ns]
            key = min(tenants, key=lambda k: (tenant_tag[k], tenants[k][0][0]))
            _, item, cost = tenants[key].popleft()
            out.append(item)
            ns_tag[ns] += cost
            tenant_tag[key] += cost / weight[key]
            if not tenants[key]:
                del tenants[key]
                if not tenants:
                    del lines[ns]
        return out

    def share(self, tenant: Tenant, now: float, contending: Iterable[Tenant] = ()) -> Share:
        """``tenant``'s fraction of recent usage against its entitlement: an equal part per
        namespace that contends, split within the namespace by weight. Contending: the tenants
        with recent usage, and ``contending`` (those waiting now)."""
        total = sum(u.advance(now) for u in self._tenants.values())
        own = self._tenants.get(tenant.key)
        got = own.value / total if own is not None and total > 0 else 0.0
        active = {key: self._weights[key] for key, u in self._tenants.items()
                  if u.running > 0 or (total > 0 and u.value >= _ACTIVE * total)}
        active.update({t.key: (t.namespace, t.weight) for t in contending})
        return Share(got, _entitlement(tenant, active))

    def entitled_now(self, tenant: Tenant) -> float:
        """``tenant``'s entitlement among the tenants that run something now: what a run may
        hold of the node when nothing waits (lent cores go back when it ends)."""
        return _entitlement(tenant, {key: self._weights[key]
                                     for key, u in self._tenants.items() if u.running > 0})

    def forget_idle(self, now: float) -> None:
        """Drop tenants (and namespaces) that run nothing and whose usage has faded away, so
        the tables do not grow with every job and function ever run."""
        for table in (self._tenants, self._namespaces):
            for key in [k for k, u in table.items() if u.running <= 0 and u.advance(now) < _GONE]:
                del table[key]
                if table is self._tenants:
                    del self._weights[key]


def _entitlement(tenant: Tenant, active: dict[str, tuple[str, float]]) -> float:
    """``tenant``'s part among ``active`` (tenant key -> namespace, weight) and itself: an
    equal part per namespace, split within the namespace by weight."""
    active = {**active, tenant.key: (tenant.namespace, tenant.weight)}
    in_ns = sum(w for ns, w in active.values() if ns == tenant.namespace)
    namespaces = len({ns for ns, _ in active.values()})
    return tenant.weight / in_ns / namespaces
