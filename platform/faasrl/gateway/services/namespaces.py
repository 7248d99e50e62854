"""What the namespace and key routes do beyond one call to the key store: who may see and change
a namespace, what it holds now and spent over the last day, when it may be deleted, a new key's
Lambda API credentials, and keeping keys' last use written.

Access answers 404 for a namespace the caller's key is not of (no existence leak) and 403 for
what its own key's role may not do; the gateway's token (root) may do everything.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import HTTPException, status

from faasrl.data.connection import UNREACHABLE
from faasrl.gateway.keys import LAST_USED_EVERY_S, ApiKey, KeyStore, sigv4_secret
from faasrl.gateway.namespace_schemas import (
    KeyCreated,
    KeyOut,
    LambdaCredentials,
    NamespaceOut,
    UsageOut,
)
from faasrl.gateway.services import Services
from faasrl.gateway.services.quotas import apply_quota
from faasrl.jobs.store import ACTIVE, JobRecord
from faasrl.namespaces import DEFAULT, Namespace, Principal, Quota, owns

log = logging.getLogger(__name__)


def _not_found(name: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"no namespace named {name!r}")


def visible(svc: Services, principal: Principal, name: str) -> Namespace:
    """The namespace ``name`` if the caller may see it (root: any; a key: its own), else 404."""
    namespace = svc.keys.namespace(name)
    if namespace is None or not (principal.root or principal.namespace == name):
        raise _not_found(name)
    return namespace


def require_root(principal: Principal, name: str | None, what: str) -> None:
    """Only the gateway's token may ``what``: 404 for a key of another namespace than
    ``name``, 403 for one of ``name`` (or for anything without a namespace)."""
    if principal.root:
        return
    if name is not None and principal.namespace != name:
        raise _not_found(name)
    raise HTTPException(status.HTTP_403_FORBIDDEN, f"only the gateway's token may {what}")


def require_admin(svc: Services, principal: Principal, name: str) -> Namespace:
    """``name``'s namespace if the caller may manage its keys (root, or an admin key of it)."""
    namespace = visible(svc, principal, name)
    if not principal.root and not principal.can_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"key {principal.key_id} may not manage keys (role "
                            f"{principal.role!r}; 'admin' may)")
    return namespace


# ---------------------------------------------------------------------------- usage and spend
async def spend(svc: Services, name: str) -> float:
    """USD over the last 24 h as the ``spend_usd_per_day`` quota counts it: the cost model's
    price of each round its jobs ran in the window (``jobs/admission.py``). Invocations made
    outside jobs are billed per record, not counted here."""
    return sum(usd for _, usd in await svc.jobs.admission.spend(name))


async def described(svc: Services, namespace: Namespace, jobs: list[JobRecord]
                    ) -> NamespaceOut:
    """A namespace with its quota and what it uses of it now."""
    held = svc.invoker.usage(namespace.name)  # as its quota counts it: invoker/quota.py
    usage = UsageOut(cores=held.cores, memory_mb=held.memory_mb, gpus=held.gpus,
                     containers=held.containers,
                     jobs=sum(1 for j in jobs if j.namespace == namespace.name
                              and j.status in ACTIVE),
                     spend_usd_per_day=await spend(svc, namespace.name))
    return NamespaceOut(name=namespace.name, quota=namespace.quota,
                        created_at=namespace.created_at, usage=usage)


# ---------------------------------------------------------------------------- changes
async def create(svc: Services, name: str, quota: Quota) -> Namespace:
    if svc.keys.namespace(name) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"a namespace named {name!r} exists")
    await svc.keys.save_namespace(Namespace(name=name, quota=quota))
    apply_quota(svc, name)
    namespace = svc.keys.namespace(name)
    assert namespace is not None
    return namespace


async def set_quota(svc: Services, principal: Principal, name: str, quota: Quota, *,
                    replace: bool) -> Namespace:
    """Give ``name`` the quota (``replace``) or change the limits ``quota`` sets (the
    gateway's token only)."""
    require_root(principal, name, "change quotas")
    namespace = visible(svc, principal, name)
    if not replace:
        quota = namespace.quota.model_copy(update=quota.model_dump(exclude_unset=True))
    await svc.keys.save_namespace(namespace.model_copy(update={"quota": quota}))
    apply_quota(svc, name)
    updated = svc.keys.namespace(name)
    assert updated is not None
    return updated


async def delete(svc: Services, name: str) -> None:
    """Forget a namespace and revoke its keys. Refused (409) for ``default`` and while it still
    holds functions or jobs (finished ones included): nothing of it is deleted behind its
    users' backs. Its records, logs, code archives and spend stay under its name (a later
    namespace of the name sees them: docs/teams.md)."""
    if name == DEFAULT:
        raise HTTPException(status.HTTP_409_CONFLICT, "namespace 'default' cannot be deleted")
    functions = [s.name for s in svc.invoker.functions() if owns(name, s.name)]
    jobs = [j.id for j in await svc.jobs.list() if j.namespace == name]
    if functions or jobs:
        held = [f"{len(functions)} function(s)"] * bool(functions) + [
            f"{len(jobs)} job(s)"] * bool(jobs)
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"namespace {name!r} still holds {' and '.join(held)}: delete "
                            "them first")
    await svc.keys.delete_namespace(name)
    apply_quota(svc, name)  # no quota left to hold it to


# ---------------------------------------------------------------------------- keys
def key_out(record: ApiKey) -> KeyOut:
    return KeyOut(id=record.id, namespace=record.namespace, role=record.role, name=record.name,
                  created_at=record.created_at, last_used_at=record.last_used_at,
                  revoked_at=record.revoked_at)


def created(svc: Services, record: ApiKey, key: str) -> KeyCreated:
    """A new key's answer: the key (this once) and its Lambda API credentials."""
    secret = svc.settings.lambda_api_secret_access_key or svc.settings.token
    credentials = None if secret is None else LambdaCredentials(
        access_key_id=record.id,
        secret_access_key=sigv4_secret(secret.get_secret_value(), record.id))
    return KeyCreated(**key_out(record).model_dump(), key=key, lambda_api=credentials)


def key_of(svc: Services, namespace: str, key_id: str) -> ApiKey:
    record = svc.keys.key(key_id)
    if record is None or record.namespace != namespace:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"no key {key_id!r} in namespace {namespace!r}")
    return record


async def flush_key_use(keys: KeyStore) -> None:
    """Write keys' last use; an unreachable Redis costs the latest uses, never the gateway."""
    try:
        await keys.flush_use()
    except UNREACHABLE as exc:
        log.warning("keys' last use not written: %s", exc)


async def write_key_use(keys: KeyStore, every_s: float = LAST_USED_EVERY_S) -> None:
    """Keep keys' last use written every ``every_s`` (a gateway task; once more at shutdown)."""
    while True:
        await asyncio.sleep(every_s)
        await flush_key_use(keys)
