"""One record per invocation, kept in Redis; cost is derived from these fields."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass, fields
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

FINAL = ("success", "error", "timeout")


@dataclass
class InvocationRecord:
    id: str
    function: str
    status: str = "queued"  # queued | running | success | error | timeout
    cold: bool = False  # it waited for its container to start
    attempts: int = 0
    queue_s: float = 0.0  # request to container assignment (includes a cold start)
    init_s: float = 0.0  # start + handler load of the container, for cold invocations
    run_s: float = 0.0  # the handler's own run time
    billed_ms: int = 0  # run time, plus init when the container was started for it
    memory_mb: int = 0
    backend: str = ""
    container: str | None = None
    requested_at: float = 0.0  # epoch seconds
    finished_at: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None

    def bill(self, run_s: float, init_s: float = 0.0) -> None:
        self.billed_ms += math.ceil((run_s + init_s) * 1000)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()


def _key(invocation_id: str) -> str:
    return f"faasrl:invocation:{invocation_id}"


def _index(function: str) -> str:
    return f"faasrl:invocations:{function}"


class RecordStore:
    """Writes records behind the hot path, in pipelined batches; never drops one silently.

    A record is readable at most ``flush_interval_s`` after ``put``; ``put_now`` writes at once.
    """

    def __init__(self, redis: Redis, ttl_s: int, *, flush_interval_s: float = 0.05,
                 index_len: int = 1000, max_backlog: int = 100_000):
        self._redis = redis
        self._ttl = ttl_s
        self._flush_interval = flush_interval_s
        self._index_len = index_len
        self._max_backlog = max_backlog
        self._backlog: list[tuple[str, str, bytes, bool]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._writer(), name="record-writer")

    def put(self, rec: InvocationRecord) -> None:
        """Queue a snapshot of the record for writing."""
        if len(self._backlog) >= self._max_backlog:
            dropped = self._backlog.pop(0)
            log.error("record backlog full (Redis down?): dropped record %s", dropped[0])
        self._backlog.append((rec.id, rec.function, rec.to_json(), rec.status in FINAL))
        self._wake.set()

    async def put_now(self, rec: InvocationRecord) -> None:
        await self._write([(rec.id, rec.function, rec.to_json(), rec.status in FINAL)])

    async def get(self, invocation_id: str) -> dict[str, Any] | None:
        raw = await self._redis.get(_key(invocation_id))
        return json.loads(raw) if raw else None

    async def recent(self, function: str, limit: int = 50) -> list[dict[str, Any]]:
        ids = await self._redis.lrange(_index(function), 0, limit - 1)
        if not ids:
            return []
        raws = await self._redis.mget([_key(i.decode()) for i in ids])
        return [json.loads(r) for r in raws if r]

    async def close(self) -> None:
        if self._task is not None:
            # The flag ends the writer if the cancellation is lost inside redis-py (see
            # JobDriver._stop_if_requested); the wake gets it out of its wait.
            self._closing = True
            self._wake.set()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._backlog:
            await self._write(self._backlog)
            self._backlog.clear()

    async def _writer(self) -> None:
        while not self._closing:
            await self._wake.wait()
            # Gather what else finishes in a short window: one round trip for many records
            # keeps Redis off the per-invocation cost.
            await asyncio.sleep(self._flush_interval)
            self._wake.clear()
            batch, self._backlog = self._backlog, []
            try:
                await self._write(batch)
            except RedisError as exc:
                log.warning("writing %d invocation records failed, will retry: %s",
                            len(batch), exc)
                self._backlog = batch + self._backlog
                await asyncio.sleep(1.0)
                self._wake.set()

    async def _write(self, batch: list[tuple[str, str, bytes, bool]]) -> None:
        if not batch:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for invocation_id, function, payload, final in batch:
                pipe.set(_key(invocation_id), payload, ex=self._ttl)
                if final:
                    pipe.lpush(_index(function), invocation_id)
                    pipe.ltrim(_index(function), 0, self._index_len - 1)
            await pipe.execute()
