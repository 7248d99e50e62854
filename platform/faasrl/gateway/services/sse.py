"""What the gateway's polling event streams share (a job's rounds, functions' logs): their
pace, a keep-alive comment while nothing happens, and the ``error`` event that ends one when
Redis is unreachable."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from faasrl.gateway.errors import REDIS_RETRY_AFTER_S, redis_unavailable_body

POLL_S = 0.5  # how often a stream looks for what is new
HEARTBEAT_S = 15.0  # a comment line after this long without an event keeps proxies from closing


def redis_error(exc: Exception) -> str:
    """The ``error`` event (an error body and a ``retry`` hint) before a stream ends. No id:
    the client's Last-Event-ID stays the last it got, so its reconnection resumes there."""
    return (f"event: error\nretry: {REDIS_RETRY_AFTER_S * 1000}\n"
            f"data: {json.dumps(redis_unavailable_body(exc))}\n\n")


class Pace:
    """Between a stream's polls: a keep-alive comment when due, and whether to go on."""

    def __init__(self, disconnected: Callable[[], Awaitable[bool]]):
        self._disconnected = disconnected
        self._quiet = 0.0

    def keep_alive(self, sent: bool) -> str | None:
        """The comment to send after ``HEARTBEAT_S`` of polls that ``sent`` nothing."""
        self._quiet = 0.0 if sent else self._quiet + POLL_S
        if self._quiet < HEARTBEAT_S:
            return None
        self._quiet = 0.0
        return ": keep-alive\n\n"

    async def wait(self) -> bool:
        """Sleep until the next poll; False once the client has gone."""
        if await self._disconnected():
            return False
        await asyncio.sleep(POLL_S)
        return True
