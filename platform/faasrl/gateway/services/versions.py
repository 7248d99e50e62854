"""Publish versions of a function, point aliases at them, and resolve an invocation's qualifier.

The versions and aliases live in Redis (``VersionRegistry``) and, for the invoke path, in memory
(``invoker.registry.Catalog``, ``Services.versions``): resolving a qualifier costs no Redis round
trip, and an unqualified invocation never comes here. ``publish_version`` and ``set_alias`` take
the Services and a qualified name, so a job's serving rule calls them as the routes do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from typing import Any

from fastapi import HTTPException, status

from faasrl import code_archive
from faasrl.gateway.errors import FieldError
from faasrl.gateway.services import Services
from faasrl.invoker.errors import CapacityError, FunctionNotFound
from faasrl.invoker.registry import CodeStore
from faasrl.invoker.versions import LATEST, Alias, FunctionVersion, versioned
from faasrl.manifest import FunctionSpec, renamed
from faasrl.namespaces import local_name, namespace_of

log = logging.getLogger(__name__)


def resolve(svc: Services, function: str, qualifier: str) -> int | None:
    """The version an invocation of ``function`` qualified so runs (None: $LATEST); an unknown
    version or alias is a ``FunctionNotFound`` (404)."""
    if qualifier == LATEST:
        return None
    if qualifier.isdigit():
        if int(qualifier) in svc.versions.versions.get(function, {}):
            return int(qualifier)
    elif (alias := svc.versions.aliases.get(function, {}).get(qualifier)) is not None:
        return alias.route()
    raise FunctionNotFound(f"function {local_name(function)!r} has no version or alias "
                           f"{qualifier!r}")


def _snapshot(spec: FunctionSpec, code_sha256: str) -> FunctionSpec:
    """What a version runs: the manifest with its code as an archive (a folder may change
    later, an archive cannot) and no containers kept warm ahead (a version's containers start
    on demand and stay warm for ``keep_alive_s``, as any function's)."""
    return spec.model_copy(update={"code_sha256": code_sha256, "code_dir": None, "min_warm": 0})


async def _code(code: CodeStore, spec: FunctionSpec) -> str:
    """The digest of the code ``spec`` runs, its folder packed and stored when it has one."""
    if spec.code_sha256 or not spec.code_dir:
        return spec.code_sha256 or ""
    data = await asyncio.to_thread(code_archive.pack, spec.code_dir)
    sha = code_archive.digest(data)
    if not await code.exists(sha):
        await code.put(sha, data, namespace_of(spec.name))
    else:
        await code.claim(sha, namespace_of(spec.name))
    return sha


async def publish_version(svc: Services, function: str,
                          description: str = "") -> FunctionVersion:
    """Publish ``function``'s $LATEST (qualified name) as a version: the newest version
    again when neither code, manifest nor config changed since (Lambda's rule), else the
    next number."""
    catalog, invoker = svc.versions, svc.invoker
    spec = invoker.spec(function)  # 404 first
    async with catalog.lock:
        sha = await _code(svc.code, spec)
        snapshot = _snapshot(spec, sha) if sha else spec.model_copy(update={"min_warm": 0})
        body = snapshot.model_dump(mode="json", exclude={"name"})
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        known = catalog.versions.setdefault(function, {})
        if known and (newest := known[max(known)]).digest == digest:
            return newest
        number = await catalog.store.next_number(function)
        version = FunctionVersion(number, digest, body, time.time(), description)
        invoker.register(renamed(snapshot, versioned(function, number)))
        await catalog.store.save_version(function, version)
        known[number] = version
        return version


def listed(svc: Services, function: str) -> list[FunctionVersion]:
    svc.invoker.spec(function)  # 404 for a function that is not (or not the caller's)
    return sorted(svc.versions.versions.get(function, {}).values(), key=lambda v: v.version)


def _found(svc: Services, function: str, held: dict[str, dict[Any, Any]], key: Any,
           what: str) -> Any:
    """``held[function][key]``; a 404 naming ``what`` when the function has none."""
    svc.invoker.spec(function)
    try:
        return held[function][key]
    except KeyError:
        raise FunctionNotFound(f"function {local_name(function)!r} has no {what}") from None


async def delete_version(svc: Services, function: str, number: int) -> None:
    """Delete a version; 409 while an alias routes to it (the alias is named)."""
    _found(svc, function, svc.versions.versions, number, f"version {number}")
    users = sorted(name for name, alias in svc.versions.aliases.get(function, {}).items()
                   if number in alias.versions())
    if users:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"version {number} is in use by alias {', '.join(users)}: move or "
                            "delete the alias first")
    await svc.versions.store.delete_version(function, number)
    del svc.versions.versions[function][number]
    svc.invoker.unregister(versioned(function, number))  # in-flight invocations finish


async def set_alias(svc: Services, function: str, name: str, version: int,
                    weights: dict[int, float] | None = None, description: str = ""
                    ) -> tuple[Alias, bool]:
    """Point alias ``name`` at ``version`` (with ``weights``: at most one more version and the
    fraction of invocations it gets); whether it is new. Invocations that already resolved the
    alias finish on the version they resolved."""
    svc.invoker.spec(function)
    known = svc.versions.versions.get(function, {})
    fields = {}
    if version not in known:
        fields["version"] = f"function {local_name(function)!r} has no version {version}"
    weights = weights or {}
    if len(weights) > 1:
        fields["routing"] = "at most one additional version"
    for extra, weight in weights.items():
        if extra not in known:
            fields["routing"] = f"no version {extra}"
        elif extra == version:
            fields["routing"] = f"version {extra} is the alias's own version"
        elif not 0 <= weight < 1:
            fields["routing"] = f"weight {weight} of version {extra} is not in [0, 1)"
    if fields:
        raise FieldError(fields)
    extra, weight = next(iter(weights.items()), (None, 0.0))
    alias = Alias(version, extra, weight, description)
    aliases = svc.versions.aliases.setdefault(function, {})
    created = name not in aliases
    await svc.versions.store.save_alias(function, name, alias)
    aliases[name] = alias
    return alias, created


def get_alias(svc: Services, function: str, name: str) -> Alias:
    return _found(svc, function, svc.versions.aliases, name, f"alias {name!r}")


def aliases(svc: Services, function: str) -> dict[str, Alias]:
    svc.invoker.spec(function)
    return dict(sorted(svc.versions.aliases.get(function, {}).items()))


async def delete_alias(svc: Services, function: str, name: str) -> None:
    get_alias(svc, function, name)
    await svc.versions.store.delete_alias(function, name)
    del svc.versions.aliases[function][name]


async def forget(svc: Services, function: str) -> None:
    """``function`` is deleted: so are its versions and aliases."""
    for number in svc.versions.versions.pop(function, {}):
        svc.invoker.unregister(versioned(function, number))
    svc.versions.aliases.pop(function, None)
    await svc.versions.store.forget(function)


async def restore(svc: Services) -> None:
    """At start: each registered function's versions (registered again) and aliases."""
    catalog, invoker = svc.versions, svc.invoker
    for spec in invoker.functions():
        versions, aliases = await catalog.store.load(spec.name)
        for version in versions:
            snapshot = FunctionSpec.model_validate({**version.spec,
                                                    "name": local_name(spec.name)})
            try:
                invoker.register(renamed(snapshot, versioned(spec.name, version.version)))
            except CapacityError as exc:
                log.error("version %d of %s does not fit this node: %s", version.version,
                          spec.name, exc.message)
                continue
            catalog.versions.setdefault(spec.name, {})[version.version] = version
        if aliases:
            catalog.aliases[spec.name] = aliases

