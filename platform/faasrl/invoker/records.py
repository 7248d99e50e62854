"""One record per invocation, kept in Redis; cost is derived from these fields."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

FinalStatus = Literal["success", "error", "timeout"]  # how an invocation can end
FINAL: tuple[str, ...] = get_args(FinalStatus)
INDEX_LEN = 1000  # finished invocations each function's index keeps (what recent() can read)


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
    backend: str = ""
    container: str | None = None
    node: str | None = None  # the machine its container ran on (a Ray node); None: this host
    requested_at: float = 0.0  # epoch seconds
    finished_at: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def uncontended_s(self) -> float:
        """The run, had it had a core of its own: its wait for one taken out."""
        return max(0.0, self.run_s - (self.wait_s or 0.0))

    def bill(self, run_s: float, init_s: float = 0.0) -> None:
        self.billed_ms += math.ceil((run_s + init_s) * 1000)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_json(self) -> bytes:
        # The instance's own dict holds exactly its fields, in order: encoded as it is, with no
        # copy (an invocation's record is encoded twice on the warm path: its answer and Redis).
        return json.dumps(vars(self), separators=(",", ":")).encode()


def _key(invocation_id: str) -> str:
    return f"faasrl:invocation:{invocation_id}"


def _index(function: str) -> str:
    return f"faasrl:invocations:{function}"


Row = tuple[str, str, bytes, bool]  # (invocation id, function, record JSON, final?)

# Writes a batch of records. KEYS: the n records' keys, then one index per function. ARGV: n,
# the TTL, the index length, the n records, then per index its count of finished ids and the
# ids in order (LPUSH puts the newest first; at most 1000 a call, Lua's limit on unpack).
_WRITE_BATCH = """
local n, ttl, keep = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[3 + i], 'EX', ttl)
end
local at = 4 + n
for k = n + 1, #KEYS do
  local count = tonumber(ARGV[at])
  for first = at + 1, at + count, 1000 do
    redis.call('LPUSH', KEYS[k], unpack(ARGV, first, math.min(first + 999, at + count)))
  end
  redis.call('LTRIM', KEYS[k], 0, keep - 1)
  at = at + 1 + count
end
"""


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
                                     "final": final}).encode() + b"\n"
                         for i, f, p, final in rows)
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
                rows.append((d["id"], d["function"], d["record"].encode(), bool(d["final"])))
            except (ValueError, KeyError, TypeError):
                log.error("record spool %s: skipping a damaged line", self.path)
        return rows

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


class RecordStore:
    """Writes records behind the hot path, in pipelined batches; never drops one.

    A record is readable at most ``flush_interval_s`` after ``put``; ``put_now`` writes at once
    (and raises while Redis is down: what it records must not be acknowledged then). Records
    that cannot be written go to the spool (``RecordSpool``) and reach Redis when it is back.
    """

    def __init__(self, redis: Redis, ttl_s: int, *, spool: Path | None = None,
                 flush_interval_s: float = 0.05, retry_s: float = 1.0,
                 index_len: int = INDEX_LEN):
        self._redis = redis
        self._ttl = ttl_s
        self._spool = RecordSpool(spool) if spool is not None else None
        self._flush_interval = flush_interval_s
        self._retry_s = retry_s
        self._index_len = index_len
        self._write_batch = redis.register_script(_WRITE_BATCH)
        self._backlog: list[Row] = []
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
        if self._spooled:
            self._wake.set()

    def put(self, rec: InvocationRecord) -> None:
        """Queue a snapshot of the record for writing."""
        self._backlog.append((rec.id, rec.function, rec.to_json(), rec.status in FINAL))
        self._wake.set()

    async def put_now(self, rec: InvocationRecord) -> None:
        await self._write([(rec.id, rec.function, rec.to_json(), rec.status in FINAL)])

    async def get(self, invocation_id: str) -> dict[str, Any] | None:
        raw = await self._redis.get(_key(invocation_id))
        return json.loads(raw) if raw else None

    async def recent(self, function: str, limit: int = 50, start: int = 0
                     ) -> list[dict[str, Any]]:
        """Up to ``limit`` finished records of ``function``, newest first, skipping the
        ``start`` newest."""
        ids = list(dict.fromkeys(await self._redis.lrange(_index(function), start,
                                                          start + limit - 1)))
        if not ids:
            return []
        raws = await self._redis.mget([_key(i.decode()) for i in ids])
        return [json.loads(r) for r in raws if r]

    async def close(self) -> None:
        """Write what is left; what cannot be written now waits in the spool."""
        if self._task is not None:
            # The flag ends the writer if the cancellation is lost inside redis-py (see
            # JobRun._stop_if_requested); the wake gets it out of its wait.
            self._closing = True
            self._wake.set()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        batch, self._backlog = self._backlog, []
        await self._flush(batch)

    async def _writer(self) -> None:
        while not self._closing:
            await self._wake.wait()
            # Gather what else finishes in a short window: one round trip for many records
            # keeps Redis off the per-invocation cost.
            await asyncio.sleep(self._flush_interval)
            self._wake.clear()
            batch, self._backlog = self._backlog, []
            if not await self._flush(batch):
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
            self._backlog = batch + self._backlog
            log.warning("writing %d invocation records failed, will retry: %s", len(batch), exc)
            return
        self._spool.append(batch)
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
        if not batch:
            return
        # One script call per batch: Redis runs it with nothing in between, and a call that
        # did not reach Redis did not run, so replaying it adds no second copy of an id to an
        # index (as with the MULTI it replaces).
        # A command per record through a MULTI cost the gateway 29 us of CPU a record (redis-py
        # packs each and parses two answers to each); this call costs 5.
        finished: dict[str, list[str]] = {}
        for invocation_id, function, _, final in batch:
            if final:
                finished.setdefault(function, []).append(invocation_id)
        keys = [_key(invocation_id) for invocation_id, *_ in batch]
        args: list[str | int | bytes] = [len(batch), self._ttl, self._index_len]
        args += [payload for _, _, payload, _ in batch]
        for function, ids in finished.items():
            keys.append(_index(function))
            args += [len(ids), *ids]
        await self._write_batch(keys=keys, args=args)
