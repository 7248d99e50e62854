"""Whether a namespace's jobs may run: its quota's concurrent ``jobs`` and ``spend_usd_per_day``.

Concurrent jobs: a job beyond its namespace's quota is not refused at submit; it waits before
its first round (status ``pending``, ``held`` saying for what), oldest submitted first, and
starts when another of the namespace's jobs ends or the quota is raised — a queue of submitted
jobs is what a team sharing a node wants, and a client polls a pending job as any other.

Spend: each round's cost (the cost model's, ``jobs/cost.py``, as the round's row bills it) is
added to the namespace's spend in Redis with its time. Before each round, a job whose
namespace spent its ``spend_usd_per_day`` over the last 24 h pauses (status ``paused``,
``held`` saying until when) and runs on once enough of the window's spend has aged out, or
the quota is raised. Only jobs' rounds are billed here: plain invocations are not.

The quotas come from the invoker (``Invoker.quota``), which holds every namespace's as the
gateway applied them (``gateway/services/quotas.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from faasrl.data.keys import spend_key
from faasrl.namespaces import Quota

SPEND_WINDOW_S = 24 * 3600.0
RECHECK_S = 60.0  # a held job looks again at least this often (the clock moves on)

OnHold = Callable[[str], Awaitable[None]]  # told why a job waits, each time that changes


@dataclass(frozen=True)
class SpendHold:
    """Why a namespace's jobs pause for spend, and when (wall time) the window lets them on."""

    reason: str
    until: float


def spend_hold(namespace: str, entries: list[tuple[float, float]], limit: float
               ) -> SpendHold | None:
    """Whether ``entries`` ((wall time, USD) spent in the window, oldest first) reach the
    namespace's ``spend_usd_per_day``; and then until when, as the oldest age out."""
    spent = left = sum(usd for _, usd in entries)
    if spent < limit:
        return None
    until = entries[-1][0] + SPEND_WINDOW_S if entries else time.time() + SPEND_WINDOW_S
    for at, usd in entries:
        left -= usd
        if left < limit:
            until = at + SPEND_WINDOW_S
            break
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until))
    return SpendHold(f"namespace {namespace!r} spent ${spent:.4f} in the last 24 h, its quota "
                     f"spend_usd_per_day={limit:g}: paused until {when} or until the quota "
                     "is raised", until)


def _entry(member: bytes, at: float) -> tuple[float, float]:
    return at, float(member.decode().rsplit(":", 1)[1])


class Admission:
    def __init__(self, quota: Callable[[str], Quota], redis: Redis):
        self._quota = quota
        self._redis = redis
        self._running: dict[str, set[str]] = {}  # namespace -> ids of its admitted jobs
        self._waiting: dict[str, list[tuple[float, str]]] = {}  # (created_at, id), oldest first
        self._changed = asyncio.Event()

    def changed(self) -> None:
        """A quota was set or a job left: held jobs look again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    # ------------------------------------------------------------- concurrent jobs
    def running(self, namespace: str) -> int:
        return len(self._running.get(namespace, ()))

    def _jobs_hold(self, namespace: str, job_id: str) -> str | None:
        limit = self._quota(namespace).jobs
        if limit is None:
            return None
        running = self.running(namespace)
        ahead = [i for _, i in self._waiting[namespace]].index(job_id)
        if running + ahead < limit:
            return None
        return (f"namespace {namespace!r} runs {running} jobs, its quota jobs={limit}"
                + (f" ({ahead} submitted earlier wait too)" if ahead else ""))

    async def enter(self, job_id: str, namespace: str, created_at: float,
                    on_hold: OnHold) -> None:
        """Wait until the job may run beside its namespace's others; it then counts as
        running until :meth:`leave`."""
        waiting = self._waiting.setdefault(namespace, [])
        waiting.append((created_at, job_id))
        waiting.sort()
        self.changed()  # those it now waits behind or ahead of say so
        try:
            told = None
            while (why := self._jobs_hold(namespace, job_id)) is not None:
                if why != told:
                    await on_hold(why)
                    told = why
                await self._wait(RECHECK_S)
        finally:
            waiting.remove((created_at, job_id))
        self._running.setdefault(namespace, set()).add(job_id)

    def leave(self, job_id: str, namespace: str) -> None:
        if job_id in self._running.get(namespace, ()):
            self._running[namespace].discard(job_id)
            self.changed()

    # ----------------------------------------------------------------------- spend
    async def spent(self, namespace: str, job_id: str, round_: int, usd: float,
                    at: float) -> None:
        """Bill a round's cost to the namespace (idempotent: a round is one entry)."""
        key = spend_key(namespace)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zadd(key, {f"{job_id}:{round_}:{usd!r}": at})
            pipe.zremrangebyscore(key, "-inf", at - SPEND_WINDOW_S)
            await pipe.execute()

    async def spend(self, namespace: str, now: float | None = None) -> list[tuple[float, float]]:
        """(wall time, USD) of the namespace's rounds over the last 24 h, oldest first."""
        now = time.time() if now is None else now
        raw = await self._redis.zrangebyscore(spend_key(namespace), now - SPEND_WINDOW_S,
                                              "+inf", withscores=True)
        return [_entry(member, at) for member, at in raw]

    async def within_spend(self, namespace: str, on_hold: OnHold) -> None:
        """Wait while the namespace's spend over the last 24 h is at its quota."""
        told = None
        while (limit := self._quota(namespace).spend_usd_per_day) is not None:
            hold = spend_hold(namespace, await self.spend(namespace), limit)
            if hold is None:
                return
            if hold.reason != told:
                await on_hold(hold.reason)
                told = hold.reason
            await self._wait(min(RECHECK_S, max(0.05, hold.until - time.time())))
