"""Namespaces and their API keys: create, list, inspect (quota, usage, spend), change quotas,
delete; create, list and revoke keys; and who the caller is (``/v1/whoami``).

Namespaces are created, changed and deleted with the gateway's token (root); a namespace's
admin key manages that namespace's keys; any key sees its own namespace. Another namespace
answers 404, what a key's role may not do 403 (``services/namespaces.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from faasrl.gateway.auth import PrincipalDep
from faasrl.gateway.namespace_schemas import (
    KeyCreate,
    KeyCreated,
    KeyId,
    KeyOut,
    NamespaceCreate,
    NamespaceName,
    NamespaceOut,
    QuotaIn,
    WhoamiOut,
)
from faasrl.gateway.schemas import BODY_ERRORS, INVALID_INPUT, REDIS_ERRORS, ErrorOut
from faasrl.gateway.services import ServicesDep
from faasrl.gateway.services import namespaces as service

_ERRORS = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut},
           **INVALID_INPUT, **REDIS_ERRORS}
router = APIRouter(prefix="/v1/namespaces", tags=["namespaces"], responses=_ERRORS)
whoami_router = APIRouter(prefix="/v1/whoami", tags=["namespaces"],
                          responses={401: {"model": ErrorOut}})


@whoami_router.get("", response_model=WhoamiOut)
async def whoami(principal: PrincipalDep) -> WhoamiOut:
    """The caller's namespace and role (the gateway's token: root, in ``default`` or the
    namespace its ``X-Faasrl-Namespace`` header names)."""
    return WhoamiOut(namespace=principal.namespace, role=principal.role,
                     key_id=principal.key_id, root=principal.root)


@router.post("", response_model=NamespaceOut, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorOut}, **BODY_ERRORS})
async def create_namespace(body: NamespaceCreate, principal: PrincipalDep, svc: ServicesDep
                           ) -> NamespaceOut:
    """Create a namespace, with its quota (left out: no limits). The gateway's token only."""
    service.require_root(principal, None, "create namespaces")
    namespace = await service.create(svc, body.name, body.quota.quota())
    return await service.described(svc, namespace, await svc.jobs.list())


@router.get("", response_model=list[NamespaceOut])
async def list_namespaces(principal: PrincipalDep, svc: ServicesDep) -> list[NamespaceOut]:
    """Every namespace (the gateway's token) or the caller's own, with quota and usage."""
    jobs = await svc.jobs.list()
    return [await service.described(svc, ns, jobs) for ns in svc.keys.namespaces()
            if principal.root or ns.name == principal.namespace]


@router.get("/{namespace}", response_model=NamespaceOut)
async def get_namespace(namespace: NamespaceName, principal: PrincipalDep, svc: ServicesDep
                        ) -> NamespaceOut:
    """A namespace's quota, what it holds now and what it spent over the last 24 h."""
    found = service.visible(svc, principal, namespace)
    return await service.described(svc, found, await svc.jobs.list())


@router.put("/{namespace}/quota", response_model=NamespaceOut, responses=BODY_ERRORS)
async def put_quota(namespace: NamespaceName, body: QuotaIn, principal: PrincipalDep,
                    svc: ServicesDep) -> NamespaceOut:
    """Replace the quota: a limit left out is no limit. The gateway's token only."""
    updated = await service.set_quota(svc, principal, namespace, body.quota(),
                                      replace=True)
    return await service.described(svc, updated, await svc.jobs.list())


@router.patch("/{namespace}/quota", response_model=NamespaceOut, responses=BODY_ERRORS)
async def patch_quota(namespace: NamespaceName, body: QuotaIn, principal: PrincipalDep,
                      svc: ServicesDep) -> NamespaceOut:
    """Change the limits given (null: no limit), keep the others. The gateway's token only."""
    updated = await service.set_quota(svc, principal, namespace, body.quota(),
                                      replace=False)
    return await service.described(svc, updated, await svc.jobs.list())


@router.delete("/{namespace}", status_code=status.HTTP_204_NO_CONTENT,
               responses={409: {"model": ErrorOut}})
async def delete_namespace(namespace: NamespaceName, principal: PrincipalDep,
                           svc: ServicesDep) -> Response:
    """Delete a namespace and revoke its keys; 409 for ``default`` and while it still holds
    functions or jobs. The gateway's token only."""
    service.require_root(principal, namespace, "delete namespaces")
    service.visible(svc, principal, namespace)
    await service.delete(svc, namespace)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{namespace}/keys", response_model=KeyCreated,
             status_code=status.HTTP_201_CREATED, responses=BODY_ERRORS)
async def create_key(namespace: NamespaceName, body: KeyCreate, principal: PrincipalDep,
                     svc: ServicesDep) -> KeyCreated:
    """A new API key of the namespace, answered this once (only its hash is kept), with its
    Lambda API credentials. The gateway's token, or an admin key of the namespace."""
    service.require_admin(svc, principal, namespace)
    record, key = await svc.keys.create_key(namespace, body.role, body.name)
    return service.created(svc, record, key)


@router.get("/{namespace}/keys", response_model=list[KeyOut])
async def list_keys(namespace: NamespaceName, principal: PrincipalDep, svc: ServicesDep
                    ) -> list[KeyOut]:
    """The namespace's keys, revoked ones included, oldest first: never a key nor its hash."""
    service.require_admin(svc, principal, namespace)
    return [service.key_out(k) for k in svc.keys.keys(namespace)]


@router.delete("/{namespace}/keys/{key_id}", response_model=KeyOut)
async def revoke_key(namespace: NamespaceName, key_id: KeyId, principal: PrincipalDep,
                     svc: ServicesDep) -> KeyOut:
    """Revoke a key: refused from its very next request on. Revoking it again changes
    nothing."""
    service.require_admin(svc, principal, namespace)
    service.key_of(svc, namespace, key_id)
    revoked = await svc.keys.revoke(key_id)
    assert revoked is not None
    return service.key_out(revoked)
