"""Whether the gateway's Redis answers, and when it came back.

One task per gateway asks Redis for its ``run_id`` every ``interval_s`` (0.2 s: one cheap
command, and functions waiting for their job's user get it soon after a restart): an outage (no
answer) or a restart between two asks (a new ``run_id``) both count as "Redis came
back", which runs the recovery callbacks — the job drivers grant their ACL users again, since a
restarted Redis has forgotten them. Drivers that met an unreachable Redis wait on ``wait_up``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

log = logging.getLogger(__name__)
# How long a running job waits, paused, for an unreachable Redis before it fails (the default of
# FAASRL_REDIS_OUTAGE_MAX_S, and of the job manager and driver built without settings).
OUTAGE_MAX_S = 600.0
Recovery = Callable[[], Awaitable[None]]


class RedisHealth:
    def __init__(self, redis: Redis, interval_s: float = 0.2):
        self._redis = redis
        self._interval = interval_s
        self._up = asyncio.Event()
        self._run_id: str | None = None
        self._down_since: float | None = None
        self._callbacks: list[Recovery] = []
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.outages = 0

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def on_recovery(self, callback: Recovery) -> None:
        self._callbacks.append(callback)

    async def start(self) -> None:
        await self.check()
        self._task = asyncio.create_task(self._watch(), name="redis-health")

    async def close(self) -> None:
        if self._task is not None:
            # The flag ends the watcher if the cancellation is lost inside redis-py (see
            # JobRun._stop_if_requested): it asks Redis five times a second.
            self._closing = True
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait_up(self, timeout_s: float) -> bool:
        """Wait until Redis answers again (at most ``timeout_s``); whether it does."""
        if not self.up:
            await self.check()
        try:
            async with asyncio.timeout(timeout_s):
                await self._up.wait()
        except TimeoutError:
            return False
        return True

    async def check(self) -> None:
        """Ping now; note an outage or a restart and run the recovery callbacks when over."""
        try:
            run_id = await self._run_id_now()
        except (RedisError, OSError) as exc:
            if self.up or self._down_since is None:
                self.outages += 1
                self._down_since = time.monotonic()
                log.warning("Redis is unreachable: %s", exc)
            self._up.clear()
            return
        restarted = self._run_id is not None and run_id != self._run_id
        back = self._down_since is not None
        self._run_id = run_id
        if back or restarted:
            gap = time.monotonic() - self._down_since if back else 0.0
            log.warning("Redis is back (%s)", f"after {gap:.1f} s" if back else "restarted")
            self._down_since = None
            await self._recover()
        self._up.set()

    async def _run_id_now(self) -> str | None:
        """The server's run id (new at every start); None where INFO is not allowed."""
        try:
            return str((await self._redis.info("server"))["run_id"])
        except ResponseError:
            await self._redis.ping()
            return None

    async def _recover(self) -> None:
        for callback in list(self._callbacks):
            try:
                await callback()
            except (RedisError, OSError) as exc:
                log.warning("recovery after the Redis outage failed, retrying: %s", exc)
                self._down_since = self._down_since or time.monotonic()
                raise

    async def _watch(self) -> None:
        while not self._closing:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except (RedisError, OSError):
                self._up.clear()
