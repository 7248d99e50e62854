"""The gateway's watch on memory: Redis's (INFO memory) and the node's (/proc/meminfo).

Past ``memory_shed_at`` of either limit the gateway sheds what can wait (new async invocations
and pre-warming answer 503 with ``Retry-After``; records leaving Redis are not archived) before
Redis refuses a write or the node runs out: jobs' data keys are never the price, as they would
be with a global Redis eviction policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from redis.exceptions import RedisError

from faasrl.gateway.schemas import MemoryOut
from faasrl.invoker.errors import InvokerError

log = logging.getLogger(__name__)
MEMINFO = Path("/proc/meminfo")
RETRY_AFTER_S = 5  # what a shed request is told to wait: the watch reads memory every second
MB = 1024 * 1024


class MemoryPressure(InvokerError):
    """Work that can wait, refused while memory is near its limit."""

    status = 503
    retry_after_s = RETRY_AFTER_S


@dataclass
class MemoryReading:
    redis_used: int = 0
    redis_max: int = 0  # Redis's maxmemory; 0: none set
    node_total: int = 0
    node_available: int = 0

    @property
    def shares(self) -> dict[str, float]:
        """The share in use of each limit there is."""
        out = {}
        if self.redis_max:
            out["redis"] = self.redis_used / self.redis_max
        if self.node_total:
            out["node"] = 1 - self.node_available / self.node_total
        return out


def node_memory(meminfo: Path = MEMINFO) -> tuple[int, int]:
    """The node's total and available memory in bytes ((0, 0) where there is no meminfo)."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in meminfo.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("MemTotal", "MemAvailable"):
                fields[name] = int(rest.split()[0]) * 1024
    return fields.get("MemTotal", 0), fields.get("MemAvailable", 0)


class MemoryWatch:
    """Reads memory every ``interval_s``; ``shedding`` while a share is past ``shed_at``."""

    def __init__(self, redis: Redis, shed_at: float, *, interval_s: float = 1.0,
                 on_change: Callable[[bool], None] | None = None):
        self._redis = redis
        self.shed_at = shed_at
        self._interval = interval_s
        self._on_change = on_change
        self.reading = MemoryReading()
        self.shedding = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.read()
        self._task = asyncio.create_task(self._loop(), name="memory-watch")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def read(self) -> None:
        try:
            info = await self._redis.info("memory")
            redis_used, redis_max = int(info["used_memory"]), int(info.get("maxmemory", 0))
        except (RedisError, KeyError, ValueError):  # the Redis health watch reports outages
            redis_used, redis_max = self.reading.redis_used, self.reading.redis_max
        total, available = node_memory()
        self.reading = MemoryReading(redis_used, redis_max, total, available)
        shedding = any(s >= self.shed_at for s in self.reading.shares.values())
        if shedding != self.shedding:
            self.shedding = shedding
            (log.warning if shedding else log.info)(
                "memory %s: %s", "near its limit, shedding what can wait" if shedding
                else "back under its limit", self.describe())
            if self._on_change is not None:
                self._on_change(shedding)

    def admit(self, what: str) -> None:
        """Refuse ``what`` (503, ``Retry-After``) while shedding."""
        if self.shedding:
            raise MemoryPressure(f"{what} refused for now: memory is near its limit "
                                 f"({self.describe()}); retry later")

    def describe(self) -> str:
        shares = self.reading.shares
        return ", ".join(f"{name} {share:.0%} used (sheds at {self.shed_at:.0%})"
                         for name, share in shares.items()) or "not measured"

    def summary(self) -> MemoryOut:
        """What ``/healthz`` says of memory."""
        r = self.reading
        return MemoryOut(state="shedding" if self.shedding else "ok", shed_at=self.shed_at,
                         shares={k: round(v, 4) for k, v in r.shares.items()},
                         redis_used_mb=round(r.redis_used / MB, 1),
                         redis_max_mb=round(r.redis_max / MB, 1) if r.redis_max else None,
                         node_available_mb=round(r.node_available / MB, 1),
                         node_total_mb=round(r.node_total / MB, 1))

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.read()


class MemoryCollector(Collector):
    """Prometheus gauges of the watch's last reading."""

    def __init__(self, watch: Callable[[], MemoryWatch]):
        self._watch = watch

    def collect(self) -> Iterator[GaugeMetricFamily]:
        w = self._watch()
        r = w.reading
        yield GaugeMetricFamily("faasrl_memory_shedding", "1 while the gateway sheds what can "
                                "wait for want of memory", value=int(w.shedding))
        shares = GaugeMetricFamily("faasrl_memory_used_ratio", "Share of a memory limit in use",
                                   labels=["limit"])
        for name, share in r.shares.items():
            shares.add_metric([name], share)
        yield shares
        yield GaugeMetricFamily("faasrl_redis_used_memory_bytes", "Redis's used_memory",
                                value=r.redis_used)
        yield GaugeMetricFamily("faasrl_node_memory_available_bytes", "The node's MemAvailable",
                                value=r.node_available)
