"""Invocation records through RecordStore's batched writer, against a real Redis."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from helpers import fn
from redis.asyncio import BlockingConnectionPool, Redis

from faasrl.client import Client
from faasrl.data.connection import gateway_redis
from faasrl.data.keys import (
    INVOCATION_LOGS,
    INVOCATION_RECORDS,
    RECORDS_BYTES,
    RECORDS_ORDER,
    invocation_key,
    invocations_index_key,
)
from faasrl.invoker import records
from faasrl.invoker.record_archive import RecordArchive
from faasrl.invoker.records import (
    DROP_MOST,
    RECORD_OVERHEAD,
    InvocationRecord,
    RecordStore,
)
from faasrl.runtime.logs import LOG_MAX


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


def test_a_batch_over_luas_unpack_limit_lands_whole_and_counted(redis_url):
    """The batch script pushes an index's ids 1000 at a time; a spool replayed after an outage
    can hold thousands."""
    async def scenario() -> tuple[list[str], int, int, int]:
        redis, store = await written(redis_url, 1200, [
            InvocationRecord(f"h{i}", "h", status="success") for i in range(2500)])
        out = [r["id"] for r in await store.recent("h", 3)], \
            len(await store.recent("h", 2000)), await redis.llen(RECORDS_ORDER), \
            int(await redis.get(RECORDS_BYTES))
        await redis.aclose()
        return out

    newest, kept, ordered, counted = asyncio.run(scenario())
    assert newest == ["h2499", "h2498", "h2497"] and kept == 1200
    assert ordered == 2500  # every record, in the order retention drops them
    counted_each = sum(len(InvocationRecord(f"h{i}", "h", status="success").to_stored())
                       for i in range(2500))
    assert counted == counted_each + 2500 * RECORD_OVERHEAD  # their lengths, counted in Redis


def test_recent_reads_a_page_of_the_index_from_any_place(redis_url):
    async def scenario() -> list[list[str]]:
        redis, store = await written(redis_url, 100, [
            InvocationRecord(f"r{i}", "f", status="success") for i in range(7)])
        pages = [[r["id"] for r in await store.recent("f", 3, start)] for start in (0, 3, 6, 9)]
        await redis.aclose()
        return pages

    assert asyncio.run(scenario()) == [["r6", "r5", "r4"], ["r3", "r2", "r1"], ["r0"], []]


def test_a_record_is_readable_and_listed_while_it_waits_for_its_batch(redis_url):
    """Read-your-writes: a client that follows the id it was answered finds the record before
    the writer has taken it to Redis."""
    async def scenario() -> tuple[Any, list[str], Any, Any]:
        redis = gateway_redis(redis_url)
        store = RecordStore(redis, ttl_s=60, flush_interval_s=60)  # its batch waits a minute
        await store.start()
        await asyncio.sleep(0.05)  # the start's own write is done
        old = InvocationRecord("old", "f", status="success")
        await store.put_now(old)
        store.put(InvocationRecord("new", "f", status="success", result=7))
        store.put(InvocationRecord("busy", "f", status="running"))
        out = await store.get("new"), [r["id"] for r in await store.recent("f", 10)], \
            await store.get("busy"), await redis.get(invocation_key("new"))
        await store.close()
        await redis.aclose()
        return out

    new, listed, busy, in_redis = asyncio.run(scenario())
    assert in_redis is None  # still queued: read from the queue
    assert new is not None and new["result"] == 7 and new["status"] == "success"
    assert new["cold"] is False and new["error"] is None  # every field, as the API answers
    assert listed == ["new", "old"]
    assert busy is not None and busy["status"] == "running"


def test_a_filter_read_in_pages_counts_a_record_in_two_places_once(redis_url, monkeypatch):
    """A record put again while its earlier write is in Redis is both queued and indexed; a
    page of one record reads it from the queue, the next from the index (seen as a dashboard
    listing one failure twice)."""
    monkeypatch.setattr(records, "MATCH_PAGE", 1)

    async def scenario() -> tuple[list[str], list[str]]:
        redis = gateway_redis(redis_url)
        store = RecordStore(redis, ttl_s=60, flush_interval_s=60)  # its batch waits a minute
        await store.start()
        await asyncio.sleep(0.05)  # the start's own write is done
        for i in range(3):
            await store.put_now(InvocationRecord(f"ok{i}", "f", status="success"))
        failed = InvocationRecord("boom", "f", status="error")
        await store.put_now(failed)
        store.put(failed)  # queued again (logs follow it, say)
        out = ([r["id"] for r in await store.matching("f", lambda r: r["status"] == "error", 5)],
               [r["id"] for r in await store.matching("f", lambda r: True, 10)])
        await store.close()
        await redis.aclose()
        return out

    failures, every = asyncio.run(scenario())
    assert failures == ["boom"]
    assert every == ["boom", "ok2", "ok1", "ok0"]


def test_records_past_the_byte_bound_leave_oldest_first_into_the_archive(redis_url, tmp_path):
    async def scenario() -> dict[str, Any]:
        redis = gateway_redis(redis_url)
        archive = RecordArchive(tmp_path / "records", max_bytes=1 << 30, max_age_s=3600)
        archive.start()
        one = len(InvocationRecord("x" * 8, "f", status="success").to_stored()) \
            + RECORD_OVERHEAD
        store = RecordStore(redis, ttl_s=3600, flush_interval_s=0.01, max_bytes=10 * one,
                            archive=archive)
        await store.start()
        for i in range(25):
            store.put(InvocationRecord(f"r{i:07d}", "f" if i % 2 else "g", status="success"))
        await store.close()
        archive.close()
        out = {"kept": [i for i in range(25) if await redis.exists(invocation_key(f"r{i:07d}"))],
               "bytes": int(await redis.get(RECORDS_BYTES)), "one": one,
               "order": await redis.llen(RECORDS_ORDER),
               "index_f": [i.decode()
                           for i in await redis.lrange(invocations_index_key("f"), 0, -1)],
               "oldest": await store.get("r0000000"), "usage": store.usage,
               "listed": [r["id"] for r in await store.recent("g", 20, from_archive=True)],
               "in_redis": [r["id"] for r in await store.recent("g", 20)]}
        await redis.aclose()
        return out

    out = asyncio.run(scenario())
    assert out["kept"] == list(range(15, 25))  # the newest ten
    assert out["bytes"] == 10 * out["one"] and out["order"] == 10
    assert out["index_f"] == [f"r{i:07d}" for i in (23, 21, 19, 17, 15)]  # trimmed with them
    assert out["oldest"] is not None and out["oldest"]["id"] == "r0000000"  # from the archive
    assert out["usage"].archived == 15 and out["usage"].discarded == 0
    # The listing reads Redis, then the archive: every one of g's, newest first.
    assert out["listed"] == [f"r{i:07d}" for i in range(24, -1, -2)]
    assert out["in_redis"] == [f"r{i:07d}" for i in range(24, 15, -2)]


def test_records_past_their_age_or_count_leave_without_an_archive(redis_url):
    async def scenario() -> tuple[list[int], int]:
        redis = gateway_redis(redis_url)
        store = RecordStore(redis, ttl_s=3600, flush_interval_s=0.01, max_count=4)
        await store.start()
        for i in range(6):
            store.put(InvocationRecord(f"c{i}", "f", status="success"))
        await store.close()
        kept = [i for i in range(6) if await redis.exists(invocation_key(f"c{i}"))]
        # Age: an entry stamped two hours ago goes on the next write.
        await redis.lpush(RECORDS_ORDER, f"{int(time.time()) - 7200} f c2")
        await redis.set(invocation_key("c2"), b"{}")
        await store._write([])
        aged = await redis.exists(invocation_key("c2"))
        await redis.aclose()
        return kept, aged

    kept, aged = asyncio.run(scenario())
    assert kept == [2, 3, 4, 5] and aged == 0


def test_records_the_archive_refuses_are_counted_as_discarded(redis_url, tmp_path):
    """An archive that takes no batch (its disk lags ``MAX_BACKLOG`` batches behind; here it is
    closed) leaves the dropped records counted as gone, not as archived nor as nothing."""
    async def scenario() -> tuple[int, int]:
        redis = gateway_redis(redis_url)
        archive = RecordArchive(tmp_path / "records", max_bytes=1 << 30, max_age_s=3600)
        archive.start()
        archive.close()
        store = RecordStore(redis, ttl_s=3600, flush_interval_s=0.01, max_count=4,
                            archive=archive)
        await store.start()
        for i in range(6):
            store.put(InvocationRecord(f"d{i}", "f", status="success"))
        await store.close()
        await redis.aclose()
        return store.usage.archived, store.usage.discarded

    assert asyncio.run(scenario()) == (0, 2)


def test_a_batch_whose_write_is_cancelled_at_close_is_written_by_close(redis_url):
    """A gateway stopping while the writer waits to send a batch (every connection busy)
    cancels that write: close() writes the batch with what is still queued, nothing lost."""
    async def scenario() -> list[bool]:
        redis = Redis(connection_pool=BlockingConnectionPool.from_url(
            redis_url, max_connections=1, timeout=None))
        store = RecordStore(redis, ttl_s=60, flush_interval_s=0.01)
        await store.start()
        await asyncio.sleep(0.05)  # the first write (the retention's) is done
        busy = asyncio.create_task(redis.blpop(["faasrl:test:nothing"], 1))  # the connection
        await asyncio.sleep(0.05)
        store.put(InvocationRecord("w0", "f", status="success"))
        while not store._writing:  # the writer took the batch and waits for the connection
            await asyncio.sleep(0.005)
        store.put(InvocationRecord("w1", "f", status="success"))
        await store.close()
        await busy
        found = [bool(await redis.exists(invocation_key(i))) for i in ("w0", "w1")]
        await redis.aclose()
        return found

    assert asyncio.run(scenario()) == [True, True]


def test_an_invocations_record_is_readable_right_after_its_answer(client: Client):
    """Through the gateway: the id a client was answered is found at once, the same record.
    Invocations a pause apart, as a person makes them: the writer is idle when each ends, so
    its batch is still gathering when the read comes (back to back, an earlier batch's window
    may have closed in time)."""
    client.deploy(fn("t"))
    for i in range(10):
        answer = client.invoke("t", {"i": i})
        assert client.invocation(answer["id"]) == answer
        time.sleep(0.1)


def test_the_archive_rotates_its_files_and_deletes_the_oldest_past_its_bytes(tmp_path):
    archive = RecordArchive(tmp_path, max_bytes=400_000, max_age_s=3600)
    archive.start()
    body = b'{"function":"f","result":"' + b"x" * 200 + b'"}'
    for batch in range(40):
        archive.append([("f", f"a{batch:02d}{i:03d}", body) for i in range(100)])
    archive.close()
    files = sorted(tmp_path.glob("records-*.sqlite"))
    names = [f.name for f in files]
    assert len(set(names)) == len(names) >= 4  # rotated, each name once
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) <= 400_000 * 1.15
    newest, oldest = asyncio.run(archive.get("a39099")), asyncio.run(archive.get("a00000"))
    assert newest == body and oldest is None


def test_a_lowered_bound_is_met_in_a_few_writes_without_traffic(redis_url):
    """A gateway restarted with a smaller bound drops ``DROP_MOST`` records a write and writes
    again at once until the bound holds, not only as invocations come."""
    async def scenario() -> int:
        redis, _ = await written(redis_url, 10, [
            InvocationRecord(f"l{i}", "f", status="success") for i in range(DROP_MOST + 500)])
        store = RecordStore(redis, ttl_s=3600, flush_interval_s=0.01, max_count=10,
                            tick_s=60)
        await store.start()
        await asyncio.sleep(0.5)
        kept = await redis.llen(RECORDS_ORDER)  # before close, which writes once more
        await store.close()
        await redis.aclose()
        return kept

    assert asyncio.run(scenario()) == 10


def test_logs_count_against_the_records_bound_and_leave_with_their_records(redis_url):
    """Logs live in their own keys (listing records never reads them) and count, key and
    all, against the records' byte bound: Redis's own count of records, logs and indexes
    stays within it, and a dropped record's logs go with it."""
    sizes = [0, 40, 700, 3000, 20_000, LOG_MAX]  # what invocations write, nothing to the most
    bound = 2 * 1024 * 1024

    async def scenario() -> tuple[int, int, set[str], set[str], list[str | None]]:
        redis = gateway_redis(redis_url)
        store = RecordStore(redis, ttl_s=3600, flush_interval_s=0.01, max_bytes=bound)
        await store.start()
        for i in range(3000):
            store.put(InvocationRecord(uuid.UUID(int=i).hex, "f", status="success"),
                      "l" * sizes[i % len(sizes)])
            if i % 200 == 0:
                await asyncio.sleep(0.02)  # several batches, as invocations finish
        for _ in range(100):  # a write drops DROP_MOST at most: the next drops the rest
            await asyncio.sleep(0.05)
            if not store._backlog and not store._writing and store.usage.bytes <= bound:
                break
        await store.close()
        records = {k.decode().removeprefix(INVOCATION_RECORDS)
                   async for k in redis.scan_iter(f"{INVOCATION_RECORDS}*", count=1000)}
        logs = {k.decode().removeprefix(INVOCATION_LOGS)
                async for k in redis.scan_iter(f"{INVOCATION_LOGS}*", count=1000)}
        used = 0
        for key in [*map(invocation_key, records), *(INVOCATION_LOGS + i for i in logs),
                    RECORDS_ORDER, invocations_index_key("f")]:
            used += await redis.memory_usage(key, samples=0) or 0
        newest = [uuid.UUID(int=i).hex for i in range(2994, 3000)]
        out = used, int(await redis.get(RECORDS_BYTES)), records, logs, \
            await store.logs(newest)
        await redis.aclose()
        return out

    used, counted, records, logs, newest = asyncio.run(scenario())
    assert counted <= bound and used <= bound * 1.1, (used, counted)
    assert 0 < len(records) < 3000  # the oldest left
    assert logs <= records  # no log outlives its record
    assert {i for i in records if sizes[uuid.UUID(i).int % len(sizes)]} == logs
    assert newest == [None, "l" * 40, "l" * 700, "l" * 3000, "l" * 20_000, "l" * LOG_MAX]
