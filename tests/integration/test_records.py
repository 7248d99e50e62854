"""Invocation records through RecordStore's batched writer, against a real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from faasrl.data.connection import gateway_redis
from faasrl.invoker.records import InvocationRecord, RecordStore, _key


async def written(redis_url: str, index_len: int, records: list[InvocationRecord]
                  ) -> tuple[Redis, RecordStore]:
    """A store (and its connection) that has written ``records`` through its batched writer."""
    redis = gateway_redis(redis_url)
    store = RecordStore(redis, ttl_s=60, flush_interval_s=0.01, index_len=index_len)
    await store.start()
    for rec in records:
        store.put(rec)
    await store.close()
    return redis, store

def test_a_batch_lands_whole_with_each_functions_index_newest_first_and_trimmed(redis_url):
    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        redis = gateway_redis(redis_url)
        store = RecordStore(redis, ttl_s=60, flush_interval_s=0.01, index_len=3)
        await store.start()
        for i in range(5):  # interleaved functions, one still running: all in one batch
            store.put(InvocationRecord(f"f{i}", "f", status="success", result=i))
            if i < 2:
                store.put(InvocationRecord(f"g{i}", "g", status="error"))
        store.put(InvocationRecord("running", "f", status="running"))
        await store.close()
        out = await store.recent("f", 10), await store.recent("g", 10), \
            await store.get("running")
        await redis.aclose()
        return out

    f, g, running = asyncio.run(scenario())
    assert [r["id"] for r in f] == ["f4", "f3", "f2"]  # the index keeps the newest 3
    assert [r["result"] for r in f] == [4, 3, 2]
    assert [r["id"] for r in g] == ["g1", "g0"]
    assert running is not None and running["status"] == "running"  # stored, not indexed


def test_a_batch_over_luas_unpack_limit_lands_whole_with_its_ttl(redis_url):
    """The batch script pushes an index's ids 1000 at a time; a spool replayed after an outage
    can hold thousands."""
    async def scenario() -> tuple[list[str], int, int]:
        redis, store = await written(redis_url, 1200, [
            InvocationRecord(f"h{i}", "h", status="success") for i in range(2500)])
        out = [r["id"] for r in await store.recent("h", 3)], \
            len(await store.recent("h", 2000)), await redis.ttl(_key("h0"))
        await redis.aclose()
        return out

    newest, kept, ttl = asyncio.run(scenario())
    assert newest == ["h2499", "h2498", "h2497"] and kept == 1200
    assert 0 < ttl <= 60


def test_recent_reads_a_page_of_the_index_from_any_place(redis_url):
    async def scenario() -> list[list[str]]:
        redis, store = await written(redis_url, 100, [
            InvocationRecord(f"r{i}", "f", status="success") for i in range(7)])
        pages = [[r["id"] for r in await store.recent("f", 3, start)] for start in (0, 3, 6, 9)]
        await redis.aclose()
        return pages

    assert asyncio.run(scenario()) == [["r6", "r5", "r4"], ["r3", "r2", "r1"], ["r0"], []]
