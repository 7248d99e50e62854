"""Function registrations, kept in Redis so that a restarted gateway still knows its functions."""

from __future__ import annotations

import logging

from pydantic import ValidationError
from redis.asyncio import Redis

from faasrl.manifest import FunctionSpec

log = logging.getLogger(__name__)
KEY = "faasrl:functions"


class FunctionRegistry:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def save(self, spec: FunctionSpec) -> None:
        await self._redis.hset(KEY, spec.name, spec.model_dump_json())

    async def delete(self, name: str) -> None:
        await self._redis.hdel(KEY, name)

    async def load(self) -> list[FunctionSpec]:
        specs = []
        for name, raw in (await self._redis.hgetall(KEY)).items():
            try:
                specs.append(FunctionSpec.model_validate_json(raw))
            except ValidationError as exc:
                log.error("skipping stored function %s: %s", name.decode(), exc)
        return specs


class CodeStore:
    """Uploaded code archives by sha256 (content-addressed, so an upload is idempotent)."""

    PREFIX = "faasrl:code:"

    def __init__(self, redis: Redis):
        self._redis = redis

    async def put(self, sha256: str, data: bytes) -> None:
        await self._redis.set(self.PREFIX + sha256, data)

    async def get(self, sha256: str) -> bytes | None:
        return await self._redis.get(self.PREFIX + sha256)

    async def exists(self, sha256: str) -> bool:
        return bool(await self._redis.exists(self.PREFIX + sha256))
