"""Namespaces' quotas at work: pushed from the key store into the invoker and the job manager,
and what each namespace holds against them (for the admin's view).

The key store (``gateway/keys.py``) keeps each namespace's ``Quota`` in Redis; the invoker
holds the namespaces' tenants to them (``invoker/quota.py``) and the job manager its jobs
(``jobs/admission.py``). A gateway applies every stored quota at start, and whoever saves a
namespace calls :func:`apply_quota` after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from faasrl.gateway.services import Services


def apply_quota(svc: Services, namespace: str) -> None:
    """Hold ``namespace`` to its stored quota from now on (a lowered one takes nothing away
    that its tenants hold: it keeps new ones out until they are under it)."""
    svc.invoker.set_quota(namespace, svc.keys.quota(namespace))
    svc.jobs.quota_changed()


def apply_all(svc: Services) -> None:
    """Apply every stored namespace's quota (at the gateway's start)."""
    for ns in svc.keys.namespaces():
        apply_quota(svc, ns.name)


@dataclass(frozen=True)
class NamespaceUsage:
    """What a namespace holds now, the quantities its ``Quota`` bounds."""

    cores: float
    memory_mb: int
    gpus: int
    containers: int
    jobs: int  # its jobs running (those waiting for the jobs quota are not)
    spend_usd_per_day: float  # its jobs' rounds' cost over the last 24 h


async def usage(svc: Services, namespace: str) -> NamespaceUsage:
    held = svc.invoker.usage(namespace)
    spent = sum(usd for _, usd in await svc.jobs.admission.spend(namespace))
    return NamespaceUsage(held.cores, held.memory_mb, held.gpus, held.containers,
                          svc.jobs.admission.running(namespace), spent)
