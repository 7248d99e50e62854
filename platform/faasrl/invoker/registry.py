"""Function registrations, kept in Redis so that a restarted gateway still knows its functions."""

from __future__ import annotations

import json
import logging

from pydantic import ValidationError
from redis.asyncio import Redis

from faasrl.data.keys import code_owners_key
from faasrl.manifest import FunctionSpec, renamed
from faasrl.namespaces import DEFAULT, local_name

log = logging.getLogger(__name__)
KEY = "faasrl:functions"


class FunctionRegistry:
    """Specs by their qualified name (``faasrl.namespaces``): the hash's field is that name, the
    stored manifest is validated under its bare one (a manifest's name has no '.') and renamed
    back, so a namespace's functions come back whole after a restart."""

    def __init__(self, redis: Redis):
        self._redis = redis

    async def save(self, spec: FunctionSpec) -> None:
        await self._redis.hset(KEY, spec.name, spec.model_dump_json())

    async def delete(self, name: str) -> None:
        await self._redis.hdel(KEY, name)

    async def load(self) -> list[FunctionSpec]:
        specs = []
        for key, raw in (await self._redis.hgetall(KEY)).items():
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

    PREFIX = "faasrl:code:"

    def __init__(self, redis: Redis):
        self._redis = redis

    async def put(self, sha256: str, data: bytes, namespace: str = DEFAULT) -> None:
        """A new archive, ``namespace``'s."""
        await self._redis.set(self.PREFIX + sha256, data)
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
        return await self._redis.get(self.PREFIX + sha256)

    async def exists(self, sha256: str) -> bool:
        return bool(await self._redis.exists(self.PREFIX + sha256))
