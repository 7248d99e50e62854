"""One record per invocation, kept in Redis within a retention (archived beyond it); cost is
derived from these fields."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from redis.asyncio import Redis
from redis.exceptions import RedisError

from faasrl.data.keys import (
    FUNCTION_INVOCATIONS,
    INVOCATION_LOGS,
    INVOCATION_RECORDS,
    RECORDS_BYTES,
    RECORDS_ORDER,
    invocation_key,
    invocation_logs_key,
    invocations_index_key,
)
from faasrl.invoker.record_archive import RecordArchive
from faasrl.namespaces import DEFAULT, local_name

log = logging.getLogger(__name__)

FinalStatus = Literal["success", "error", "timeout"]  # how an invocation can end
FINAL: tuple[str, ...] = get_args(FinalStatus)
INDEX_LEN = 1000  # finished invocations each function's index keeps (what recent() can read)
MATCH_PAGE = 200  # records read at a time when looking for those a filter keeps


def micro(seconds: float) -> float:
    """To the microsecond, as records keep durations: the digits a float's repr adds past it
    say nothing of a run and cost Redis a tenth of a record."""
    return round(seconds, 6)


@dataclass
class InvocationRecord:
    id: str
    function: str
    status: str = "queued"  # queued | running | success | error | timeout
    cold: bool = False  # it waited for its container to start
    stem_cell: bool = False  # cold, and that container was a stem cell specialised for it
    attempts: int = 0
    queue_s: float = 0.0  # request to container assignment (includes a cold start)
    init_s: float = 0.0  # start + handler load of the container, for cold invocations
    run_s: float = 0.0  # the handler's own run time
    cpu_s: float | None = None  # the function process's CPU time during the run
    wait_s: float | None = None  # of run_s, waiting for a core (None: not measured, e.g. Lambda)
    billed_ms: int = 0  # run time, plus init when the container was started for it
    memory_mb: int = 0
    cores: float | None = None  # the cores its run had, where it could have more (cpu_max)
    backend: str = ""
    job: str | None = None  # the job it ran for (its Tenant's job); None: a plain invocation
    container: str | None = None
    node: str | None = None  # the machine its container ran on (a Ray node); None: this host
    namespace: str = DEFAULT  # whose it is: its function's, or for a job's, the job's
    requested_at: float = 0.0  # epoch seconds
    finished_at: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    # An asynchronous invocation's retries: each attempt has its own record.
    retry_of: str | None = None  # on a retry: the first attempt's id (the id accepted)
    retried_by: str | None = None  # on a failed attempt that is retried: the next one's id
    version: int | None = None  # the published version that ran (None: $LATEST)

    @property
    def capacity_wait_s(self) -> float:
        """Of ``queue_s``, the wait for capacity: a cold start's ``init_s`` taken out."""
        return max(0.0, self.queue_s - (self.init_s if self.cold else 0.0))

    @property
    def uncontended_s(self) -> float:
        """The run, had it had a core of its own: its wait for one taken out."""
        return max(0.0, self.run_s - (self.wait_s or 0.0))

    def bill(self, run_s: float, init_s: float = 0.0) -> None:
        self.billed_ms += math.ceil((run_s + init_s) * 1000)

    def to_json(self) -> bytes:
        # The whole record, as an invocation's answer: the instance's own dict holds exactly its
        # fields, in order, so it is encoded as it is, with no copy (Redis gets ``to_stored``);
        # outside ``default`` under its function's bare name, as the API speaks.
        if self.namespace == DEFAULT:
            return json.dumps(vars(self), separators=(",", ":")).encode()
        return json.dumps({**vars(self), "function": local_name(self.function)},
                          separators=(",", ":")).encode()

    def to_stored(self) -> bytes:
        """What Redis and the archive keep: no id (the key holds it), and none of the fields
        a warm success leaves at their defaults (``OFTEN_DEFAULT``) that are; ``from_stored``
        reads it back whole. (Checking these few costs less than the bytes they save to
        encode; checking every field would cost more.)"""
        kept = dict(vars(self))
        del kept["id"]
        for name in OFTEN_DEFAULT:
            if kept[name] == _DEFAULTS[name]:
                del kept[name]
        return json.dumps(kept, separators=(",", ":")).encode()


# Each field's default, in field order (those without one, None: ``from_stored`` fills them).
_DEFAULTS: dict[str, Any] = {f.name: None if f.default is MISSING else f.default
                             for f in fields(InvocationRecord)}
OFTEN_DEFAULT = ("cold", "stem_cell", "init_s", "cores", "node", "namespace", "job", "result",
                 "error", "retry_of", "retried_by", "version")


def from_stored(invocation_id: str, raw: bytes | str) -> dict[str, Any]:
    """A stored record (``to_stored``, or a whole one) as the API answers it: every field."""
    return {**_DEFAULTS, **json.loads(raw), "id": invocation_id}


# What Redis spends on a record beyond its JSON: its key (an id's 50 characters), the key's
# entry in the keyspace and its string's header, its entry in RECORDS_ORDER and in its
# function's index. Measured with MEMORY USAGE on Redis 6.2
# (tests/integration/test_record_retention.py holds the sum of it all to the cap).
RECORD_OVERHEAD = 200
# The same for an invocation's logs (INVOCATION_LOGS + its id): the key, its keyspace entry and
# the string's header and rounding, 114-136 bytes by MEMORY USAGE from 40 B to 64 KB of logs,
# 140 by used_memory over 20,000 keys (tests/integration/test_records.py holds them to the cap).
LOGS_OVERHEAD = 140


# (invocation id, function, stored record, final?, its logs: b"" for none)
Row = tuple[str, str, bytes, bool, bytes]

# Writes a batch of records (and their logs), then drops the oldest records (and their logs)
# while those kept are over a bound. KEYS: RECORDS_ORDER, RECORDS_BYTES, the n records' keys,
# then one index per function. ARGV: n, the index length, the byte and count bounds, the oldest
# first-write time kept, RECORD_OVERHEAD, whether to return what it drops (for the archive),
# the most it drops a call, INVOCATION_RECORDS, FUNCTION_INVOCATIONS, INVOCATION_LOGS,
# LOGS_OVERHEAD; then the n records, the n RECORDS_ORDER entries, the n logs ('' for none),
# then per index its count of finished ids and the ids in order (LPUSH puts the newest first;
# at most 1000 a call, Lua's limit on unpack). Bytes are counted from the lengths Redis has at
# hand (STRLEN), never by reading a record back; a record's logs count with it. Returns the
# bytes and count kept, the count dropped, then (when asked for) the dropped entries and
# records in pairs (logs are not archived).
_WRITE_BATCH = """
local n, keep, max_bytes, max_count = tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3]), tonumber(ARGV[4])
local oldest, over, archive, most = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1',
  tonumber(ARGV[8])
local key_prefix, index_prefix = ARGV[9], ARGV[10]
local logs_prefix, logs_over = ARGV[11], tonumber(ARGV[12])
local base = 12
local delta = 0
local new = {}
for i = 1, n do
  local key, value = KEYS[2 + i], ARGV[base + i]
  local old = redis.call('STRLEN', key)
  redis.call('SET', key, value)
  if old == 0 then
    new[#new + 1] = ARGV[base + n + i]
    delta = delta + #value + over
  else
    delta = delta + #value - old
  end
  local logs = ARGV[base + 2 * n + i]
  if logs ~= '' then
    local logs_key = logs_prefix .. string.sub(key, #key_prefix + 1)
    local old_logs = redis.call('STRLEN', logs_key)
    redis.call('SET', logs_key, logs)
    delta = delta + #logs - old_logs
    if old_logs == 0 then delta = delta + logs_over end
  end
end
for first = 1, #new, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(new, first, math.min(first + 999, #new)))
end
local bytes = tonumber(redis.call('INCRBY', KEYS[2], delta))
local at = base + 3 * n + 1
for k = n + 3, #KEYS do
  local count = tonumber(ARGV[at])
  for first = at + 1, at + count, 1000 do
    redis.call('LPUSH', KEYS[k], unpack(ARGV, first, math.min(first + 999, at + count)))
  end
  redis.call('LTRIM', KEYS[k], 0, keep - 1)
  at = at + 1 + count
end
local count = redis.call('LLEN', KEYS[1])
local out = {0, 0, 0}
local touched = {}
local dropped = 0
while dropped < most and count > 0 do
  local heads = redis.call('LRANGE', KEYS[1], 0, math.min(99, most - dropped - 1))
  local taken = 0
  for _, entry in ipairs(heads) do
    local t, fn, id = string.match(entry, '^(%d+) (%S+) (%S+)$')
    if bytes <= max_bytes and count <= max_count and tonumber(t) >= oldest then break end
    local key = key_prefix .. id
    local size = redis.call('STRLEN', key)
    if archive and size > 0 then
      out[#out + 1] = entry
      out[#out + 1] = redis.call('GET', key)
    end
    redis.call('DEL', key)
    bytes = bytes - size - over
    local logs_key = logs_prefix .. id
    local logs_size = redis.call('STRLEN', logs_key)
    if logs_size > 0 then
      redis.call('DEL', logs_key)
      bytes = bytes - logs_size - logs_over
    end
    count = count - 1
    taken = taken + 1
    touched[fn] = true
  end
  if taken == 0 then break end
  redis.call('LTRIM', KEYS[1], taken, -1)
  dropped = dropped + taken
end
if dropped > 0 then
  if count == 0 then bytes = 0 end
  redis.call('SET', KEYS[2], bytes)
  -- A function's index lists its newest ids: those dropped are at its tail.
  for fn in pairs(touched) do
    local index = index_prefix .. fn
    while true do
      local tail = redis.call('LINDEX', index, -1)
      if not tail or redis.call('EXISTS', key_prefix .. tail) == 1 then break end
      redis.call('RPOP', index)
    end
  end
end
out[1], out[2], out[3] = bytes, count, dropped
return out
"""
UNBOUNDED = 2**53  # a bound that is none (exact as a Lua number)
DROP_MOST = 2000  # records one write drops at most: a lowered bound is met over a few writes


@dataclass
class Retention:
    """How much of the records Redis keeps: the oldest go first past any bound."""

    ttl_s: int
    max_bytes: int | None = None
    max_count: int | None = None


@dataclass
class RecordUsage:
    """What the records cost in Redis after the last write, and where those dropped went."""

    bytes: int = 0
    count: int = 0
    archived: int = 0  # records dropped from Redis and kept in the archive
    discarded: int = 0  # records dropped with no archive to take them (or while it sheds)


class RecordSpool:
    """Records that could not be written to Redis, kept in an append-only file until they are.

    An invocation that was answered must keep its record, even when Redis was down then and the
    gateway stopped before it came back: each line is one record (JSON), appended and fsynced
    as the write fails, replayed in order when Redis answers again or at the next start.
    """

    def __init__(self, path: Path):
        self.path = path

    def append(self, rows: list[Row]) -> None:
        if not rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = b"".join(json.dumps({"id": i, "function": f, "record": p.decode(),
                                     "final": final, "logs": logs.decode()}).encode() + b"\n"
                         for i, f, p, final, logs in rows)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, lines)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> list[Row]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        rows = []
        for line in text.splitlines():
            try:
                d = json.loads(line)
                rows.append((d["id"], d["function"], d["record"].encode(), bool(d["final"]),
                             d.get("logs", "").encode()))
            except (ValueError, KeyError, TypeError):
                log.error("record spool %s: skipping a damaged line", self.path)
        return rows

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


class RecordStore:
    """Writes records behind the hot path, in pipelined batches, and keeps them bounded.

    A record is readable as soon as ``put`` returns: until its batch is in Redis, reads find it
    in the batch (read-your-writes). ``put_now`` writes at once (and raises while Redis is
    down: what it records must not be acknowledged then). Records that cannot be written go to
    the spool (``RecordSpool``) and reach Redis when it is back. Each write drops the oldest
    records past the retention's bounds (``Retention``), into the archive when there is one
    (and ``archiving`` is on) and unread otherwise.
    """

    def __init__(self, redis: Redis, ttl_s: int, *, spool: Path | None = None,
                 flush_interval_s: float = 0.05, retry_s: float = 1.0,
                 index_len: int = INDEX_LEN, max_bytes: int | None = None,
                 max_count: int | None = None, archive: RecordArchive | None = None,
                 tick_s: float = 10.0):
        self._redis = redis
        self.retention = Retention(ttl_s, max_bytes, max_count)
        self.archive = archive
        self.archiving = True  # off: records leaving Redis are not archived (memory pressure)
        self.usage = RecordUsage()
        self._spool = RecordSpool(spool) if spool is not None else None
        self._flush_interval = flush_interval_s
        self._retry_s = retry_s
        self._tick_s = tick_s  # a write this often even with none to make: records age out
        self._index_len = index_len
        self._write_batch = redis.register_script(_WRITE_BATCH)
        # Records queued for the next batch and those of the batch being written, by id
        # (a record put again before its batch leaves is written once, as it is last).
        self._backlog: dict[str, Row] = {}
        self._writing: dict[str, Row] = {}
        self._spooled = False  # rows wait in the spool file
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Replay what an earlier gateway left in the spool, then start the writer."""
        if self._spool is not None and self._spool.path.exists():
            self._spooled = True
            with contextlib.suppress(RedisError):
                await self._drain_spool()
        self._task = asyncio.create_task(self._writer(), name="record-writer")
        self._wake.set()  # the first write applies the retention at once

    def put(self, rec: InvocationRecord, logs: str | None = None) -> None:
        """Queue a snapshot of the record (and the invocation's ``logs``) for writing."""
        self._backlog[rec.id] = (rec.id, rec.function, rec.to_stored(), rec.status in FINAL,
                                 logs.encode(errors="replace") if logs else b"")
        self._wake.set()

    async def put_now(self, rec: InvocationRecord) -> None:
        await self._write([(rec.id, rec.function, rec.to_stored(), rec.status in FINAL, b"")])

    async def get(self, invocation_id: str) -> dict[str, Any] | None:
        """A record by id: queued for writing, in Redis, else in the archive."""
        row = self._backlog.get(invocation_id) or self._writing.get(invocation_id)
        if row is not None:
            return from_stored(invocation_id, row[2])
        raw = await self._redis.get(invocation_key(invocation_id))
        if raw is None and self.archive is not None:
            raw = await self.archive.get(invocation_id)
        return from_stored(invocation_id, raw) if raw else None

    async def logs(self, ids: list[str]) -> list[str | None]:
        """What each invocation wrote ("": nothing; None: no logs kept, or past their
        retention), queued for writing or in Redis."""
        found: dict[str, bytes] = {}
        for rows in (self._writing, self._backlog):
            found.update((i, rows[i][4]) for i in ids if i in rows)
        missing = [i for i in ids if i not in found]
        if missing:
            found.update(zip(missing,
                             await self._redis.mget([invocation_logs_key(i) for i in missing]),
                             strict=True))
        return [None if (raw := found[i]) is None else raw.decode(errors="replace")
                for i in ids]

    async def logs_kept(self, invocation_id: str) -> bool:
        """Whether the invocation's logs are still kept: its record is queued or in Redis (the
        archive keeps records, not logs)."""
        return (invocation_id in self._backlog or invocation_id in self._writing
                or bool(await self._redis.exists(invocation_key(invocation_id))))

    async def recent(self, function: str, limit: int = 50, start: int = 0, *,
                     from_archive: bool = False) -> list[dict[str, Any]]:
        """Up to ``limit`` finished records of ``function``, newest first, skipping the
        ``start`` newest: those queued for writing, then Redis's index, then (``from_archive``:
        a listing, not a dashboard's poll) the archive."""
        queued = [(row[0], row[2]) for rows in (self._backlog, self._writing)
                  for row in reversed(rows.values()) if row[3] and row[1] == function]
        found: list[tuple[str, bytes]] = queued[start:start + limit]
        skip = max(0, start - len(queued))
        want = limit - len(found)
        if want > 0:
            index = invocations_index_key(function)
            ids = [i.decode() for i in dict.fromkeys(
                await self._redis.lrange(index, skip, skip + want - 1))]
            if ids:
                raws = await self._redis.mget([invocation_key(i) for i in ids])
                found += [(i, r) for i, r in zip(ids, raws, strict=True) if r]
            if len(ids) < want and from_archive and self.archive is not None:
                skip = max(0, skip - await self._redis.llen(index))
                found += await self.archive.recent(function, limit - len(found), skip)
        records: dict[str, dict[str, Any]] = {}
        for i, raw in found:  # each id once, as it was found first (newest first)
            if i not in records:
                records[i] = from_stored(i, raw)
        return list(records.values())[:limit]

    async def matching(self, function: str, keep: Callable[[dict[str, Any]], bool],
                       limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` of ``function``'s most recent finished records that ``keep``
        accepts, newest first, among every record its index keeps, read a page at a time
        until there are enough (a dashboard polls this). Between pages records arrive and
        move from the batch to Redis, so a page may repeat one an earlier page read: each
        counts once."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, self._index_len, MATCH_PAGE):
            page = await self.recent(function, MATCH_PAGE, start)
            for record in page:
                if keep(record):
                    found.setdefault(record["id"], record)
            if len(found) >= limit or not page:
                break
        return list(found.values())[:limit]

    async def close(self) -> None:
        """Write what is left; what cannot be written now waits in the spool."""
        if self._task is not None:
            # The flag ends the writer if the cancellation is lost inside redis-py (see
            # JobRun._stop_if_requested); the wake gets it out of its wait.
            self._closing = True
            self._wake.set()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        # The batch whose write the cancellation cut short too (writing it again changes
        # nothing but an index entry, which reads drop).
        batch = {**self._writing, **self._backlog}
        self._writing, self._backlog = {}, {}
        await self._flush(list(batch.values()))

    async def _writer(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._tick_s)
            # Gather what else finishes in a short window: one round trip for many records
            # keeps Redis off the per-invocation cost.
            await asyncio.sleep(self._flush_interval)
            self._wake.clear()
            self._writing, self._backlog = self._backlog, {}
            written = await self._flush(list(self._writing.values()))
            self._writing = {}
            if not written:
                await asyncio.sleep(self._retry_s)
                self._wake.set()

    async def _flush(self, batch: list[Row]) -> bool:
        """Write what waits in the spool, then ``batch``; whether Redis took it all (what it
        refused is in the spool)."""
        try:
            if self._spooled:
                await self._drain_spool()
            await self._write(batch)
        except RedisError as exc:
            self._keep(batch, exc)
            return False
        return True

    def _keep(self, batch: list[Row], exc: Exception) -> None:
        """Redis refused ``batch``: spool it (or, with no spool, hold it for the next try)."""
        if not batch:
            return
        if self._spool is None:
            self._backlog = {**{row[0]: row for row in batch}, **self._backlog}
            log.warning("writing %d invocation records failed, will retry: %s", len(batch), exc)
            return
        self._spool.append(batch)  # Redis is down: no read would find them anyway
        if not self._spooled:
            log.warning("Redis refused invocation records (%s): keeping them in %s until it "
                        "answers", exc, self._spool.path)
        self._spooled = True

    async def _drain_spool(self) -> None:
        assert self._spool is not None
        rows = self._spool.read()
        await self._write(rows)
        self._spool.clear()
        self._spooled = False
        if rows:
            log.warning("wrote %d spooled invocation records to Redis", len(rows))

    async def _write(self, batch: list[Row]) -> None:
        # One script call per batch (an empty one applies the retention): Redis runs it with
        # nothing in between, and a call that did not reach Redis did not run, so replaying it
        # adds no second copy of an id to an index (as with the MULTI it replaces).
        # A command per record through a MULTI cost the gateway 29 us of CPU a record (redis-py
        # packs each and parses two answers to each); this call costs 5.
        finished: dict[str, list[str]] = {}
        for invocation_id, function, _, final, _ in batch:
            if final:
                finished.setdefault(function, []).append(invocation_id)
        r = self.retention
        archive = self.archive is not None and self.archiving
        stamp = int(time.time())
        keys = [RECORDS_ORDER, RECORDS_BYTES, *[invocation_key(i) for i, *_ in batch]]
        args: list[str | int | bytes] = [
            len(batch), self._index_len, r.max_bytes or UNBOUNDED, r.max_count or UNBOUNDED,
            stamp - r.ttl_s, RECORD_OVERHEAD, int(archive), DROP_MOST, INVOCATION_RECORDS,
            FUNCTION_INVOCATIONS, INVOCATION_LOGS, LOGS_OVERHEAD]
        args += [payload for _, _, payload, _, _ in batch]
        args += [f"{stamp} {function} {invocation_id}" for invocation_id, function, *_ in batch]
        args += [logs for *_, logs in batch]
        for function, ids in finished.items():
            keys.append(invocations_index_key(function))
            args += [len(ids), *ids]
        self._count(await self._write_batch(keys=keys, args=args))

    def _count(self, out: list[Any]) -> None:
        """Take in what the write script answered: the usage, and what it dropped."""
        usage = self.usage
        usage.bytes, usage.count = int(out[0]), int(out[1])
        dropped = int(out[2])
        if dropped >= DROP_MOST:  # more to drop (a bound was lowered): again, traffic or not
            self._wake.set()
        if len(out) > 3:
            rows = [(*entry.decode().split(" ", 2)[1:], payload)
                    for entry, payload in zip(out[3::2], out[4::2], strict=True)]
            assert self.archive is not None
            taken = self.archive.append(rows)  # none while its disk lags behind
            usage.archived += taken
            dropped -= taken
        usage.discarded += dropped
