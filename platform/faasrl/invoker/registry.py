"""Function registrations, kept in Redis so that a restarted gateway still knows its functions."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass, field

from pydantic import ValidationError
from redis.asyncio import Redis

from faasrl.data.keys import (
    FUNCTIONS,
    aliases_key,
    code_key,
    code_owners_key,
    last_version_key,
    versions_key,
)
from faasrl.invoker.versions import Alias, FunctionVersion
from faasrl.manifest import FunctionSpec, renamed
from faasrl.namespaces import DEFAULT, local_name

log = logging.getLogger(__name__)


class FunctionRegistry:
    """Specs by their qualified name (``faasrl.namespaces``): the hash's field is that name, the
    stored manifest is validated under its bare one (a manifest's name has no '.') and renamed
    back, so a namespace's functions come back whole after a restart."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def save(self, spec: FunctionSpec) -> None:
        await self._redis.hset(FUNCTIONS, spec.name, spec.model_dump_json())

    async def delete(self, name: str) -> None:
        await self._redis.hdel(FUNCTIONS, name)

    async def load(self) -> list[FunctionSpec]:
        specs = []
        for key, raw in (await self._redis.hgetall(FUNCTIONS)).items():
            name = key.decode()
            try:
                spec = FunctionSpec.model_validate({**json.loads(raw), "name": local_name(name)})
            except (ValueError, ValidationError) as exc:
                log.error("skipping stored function %s: %s", name, exc)
                continue
            specs.append(renamed(spec, name))
        return specs


class CodeStore:
    """Uploaded code archives by sha256 (content-addressed, so an upload is idempotent), each
    belonging to the namespaces that uploaded it: a manifest or a job may name only an archive
    of its own namespace (``owned``). An archive stored before namespaces is ``default``'s."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def put(self, sha256: str, data: bytes, namespace: str = DEFAULT) -> None:
        """A new archive, ``namespace``'s."""
        await self._redis.set(code_key(sha256), data)
        await self._redis.sadd(code_owners_key(sha256), namespace)

    async def claim(self, sha256: str, namespace: str) -> None:
        """``namespace`` uploaded a stored archive again: it may name it from now on. One
        stored before namespaces stays ``default``'s as another namespace claims it."""
        owners = code_owners_key(sha256)
        if namespace != DEFAULT and not await self._redis.exists(owners):
            await self._redis.sadd(owners, DEFAULT)
        await self._redis.sadd(owners, namespace)

    async def owned(self, namespace: str, sha256: str) -> bool:
        """Whether ``namespace`` may name the archive: it exists and the namespace uploaded it
        (``default`` also owns those stored before namespaces)."""
        if not await self.exists(sha256):
            return False
        if await self._redis.sismember(code_owners_key(sha256), namespace):
            return True
        return namespace == DEFAULT and not await self._redis.exists(code_owners_key(sha256))

    async def get(self, sha256: str) -> bytes | None:
        return await self._redis.get(code_key(sha256))

    async def exists(self, sha256: str) -> bool:
        return bool(await self._redis.exists(code_key(sha256)))


class VersionRegistry:
    """Published versions and aliases in Redis (``data/keys.py``), read back whole at start."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def next_number(self, function: str) -> int:
        return int(await self._redis.incr(last_version_key(function)))

    async def save_version(self, function: str, version: FunctionVersion) -> None:
        await self._redis.hset(versions_key(function), str(version.version),
                               json.dumps(asdict(version)))

    async def delete_version(self, function: str, version: int) -> None:
        await self._redis.hdel(versions_key(function), str(version))

    async def save_alias(self, function: str, name: str, alias: Alias) -> None:
        await self._redis.hset(aliases_key(function), name, json.dumps(alias.to_json()))

    async def delete_alias(self, function: str, name: str) -> None:
        await self._redis.hdel(aliases_key(function), name)

    async def forget(self, function: str) -> None:
        """The function is deleted: its versions, aliases and numbering go with it."""
        await self._redis.delete(versions_key(function), last_version_key(function),
                                 aliases_key(function))

    async def load(self, function: str) -> tuple[list[FunctionVersion], dict[str, Alias]]:
        versions = [FunctionVersion(**json.loads(raw))
                    for raw in (await self._redis.hgetall(versions_key(function))).values()]
        aliases = {name.decode(): Alias(**json.loads(raw))
                   for name, raw in (await self._redis.hgetall(aliases_key(function))).items()}
        return sorted(versions, key=lambda v: v.version), aliases


@dataclass
class Catalog:
    """Every function's versions and aliases, by its qualified name."""

    store: VersionRegistry
    versions: dict[str, dict[int, FunctionVersion]] = field(default_factory=dict)
    aliases: dict[str, dict[str, Alias]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one publish at a time
