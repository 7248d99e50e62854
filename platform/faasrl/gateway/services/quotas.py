"""Namespaces' quotas at work: pushed from the key store into the invoker and the job manager.

The key store (``gateway/keys.py``) keeps each namespace's ``Quota`` in Redis; the invoker
holds the namespaces' tenants to them (``invoker/quota.py``) and the job manager its jobs
(``jobs/admission.py``). A gateway applies every stored quota at start, and whoever saves a
namespace calls :func:`apply_quota` after it.
"""

from __future__ import annotations

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
