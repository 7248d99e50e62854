"""Per-job trajectory streams: actors append one safetensors blob per batch, learners consume.

A Redis Stream per job with one consumer group. The learner acknowledges (and deletes) a round's
entries only after its update is published, so a learner that crashes mid-update loses nothing:
the next one reads the still-pending entries first. Every blob is checked against the job's
schema before anyone trains on it; a blob that fails is moved to the job's dead-letter list with
the reason, and the reason is reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from redis import Redis
from redis.client import Pipeline
from redis.exceptions import ResponseError

from faasrl.data.codec import CodecError, decode_arrays, encode_arrays
from faasrl.data.keys import rejected_key, trajectories_key

GROUP = "learners"


@dataclass(frozen=True)
class TrajectorySchema:
    """What a job's batches must look like (its algorithm's ``batch_schema``): per key, its dtype
    and the shape after the row axis.

    ``fields`` have one row per step; ``env_fields`` one per env (``last_obs``): ``envs`` rows,
    and the step rows must be a whole number of steps of that many envs.
    """

    fields: Mapping[str, tuple[str, tuple[int, ...]]]
    env_fields: Mapping[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    envs: int = 0

    def problem(self, arrays: Mapping[str, np.ndarray]) -> str | None:
        """Why these arrays cannot be trained on, or None when they match."""
        expected = {**self.fields, **self.env_fields}
        missing = sorted(set(expected) - set(arrays))
        extra = sorted(set(arrays) - set(expected))
        if missing or extra:
            return f"keys: missing {missing}, unexpected {extra}"
        rows = {arrays[k].shape[0] if arrays[k].ndim else -1 for k in self.fields}
        if len(rows) != 1 or rows == {-1} or rows == {0}:
            return f"row counts differ or are empty: {sorted(rows)}"
        if self.env_fields:
            envs = {arrays[k].shape[0] if arrays[k].ndim else -1 for k in self.env_fields}
            if envs != {self.envs} or next(iter(rows)) % self.envs:
                return f"env rows {sorted(envs)}: expected {self.envs} envs, whose steps " \
                       f"make up the {next(iter(rows))} step rows"
        for key, (dtype, shape) in expected.items():
            a = arrays[key]
            if str(a.dtype) != dtype:
                return f"{key}: dtype {a.dtype}, expected {dtype}"
            if tuple(a.shape[1:]) != shape:
                expected = ", ".join(("rows", *map(str, shape)))
                return f"{key}: shape {tuple(a.shape)}, expected ({expected})"
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                return f"{key}: contains NaN or infinity"
        return None


@dataclass
class Batch:
    entry_id: str
    round: int
    slot: int
    version: int
    arrays: dict[str, np.ndarray]

    @property
    def rows(self) -> int:
        return len(self.arrays["obs"])


@dataclass(frozen=True)
class Rejection:
    entry_id: str
    round: int
    slot: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"entry": self.entry_id, "round": self.round, "slot": self.slot,
                "reason": self.reason}


class TrajectoryStream:
    def __init__(self, redis: Redis, job_id: str):
        self._redis = redis
        self._stream = trajectories_key(job_id)
        self._dead = rejected_key(job_id)

    def put(self, round: int, slot: int, version: int, arrays: Mapping[str, np.ndarray], *,
            compress: bool = False) -> int:
        """Append one batch; returns its size in bytes."""
        return self.append(round, slot, version, arrays, compress=compress)[1]

    def append(self, round: int, slot: int, version: int, arrays: Mapping[str, np.ndarray], *,
               compress: bool = False) -> tuple[str, int]:
        """Append one batch; returns its entry id (the key a learner is given) and size."""
        blob = encode_arrays(arrays, compress=compress)
        entry = self._redis.xadd(self._stream, {"round": round, "slot": slot,
                                                "version": version, "data": blob})
        return entry.decode(), len(blob)

    def read_entries(self, entry_ids: Collection[str], schema: TrajectorySchema
                     ) -> tuple[list[Batch], list[Rejection]]:
        """The batches with these entry ids, for a learner handed them by the driver (the
        asynchronous mode: no rounds, no consumer group). An id that is gone, or a batch that
        does not match the schema, is rejected with the reason."""
        batches: list[Batch] = []
        rejected: list[Rejection] = []
        for eid, reply in zip(entry_ids, self._ranges(entry_ids), strict=True):
            if not reply:
                rejected.append(Rejection(eid, -1, -1, "entry not in the stream"))
                continue
            entry_id, fields = reply[0]
            batch, why = self._parse(entry_id, fields, schema)
            if why is None:
                batches.append(batch)
            else:
                rejected.append(self._reject(entry_id, fields, why))
        return batches, rejected

    def delete(self, entry_ids: Collection[str]) -> None:
        """Remove entries that were trained on (or will never be)."""
        if entry_ids:
            self._redis.xdel(self._stream, *entry_ids)

    def clear(self) -> None:
        """Drop every batch (an asynchronous job resuming mid-round starts the round afresh)."""
        self._redis.delete(self._stream)

    def read_round(self, round: int, slots: Collection[int], schema: TrajectorySchema, *,
                   consumer: str = "learner", timeout_s: float = 30.0
                   ) -> tuple[list[Batch], list[Rejection]]:
        """The batches of ``round`` from ``slots`` (waiting up to ``timeout_s`` for missing
        ones); anything that does not match the schema or the round is rejected on the spot.

        A slot whose batch for this round was rejected counts as answered: its actor has
        reported, and waiting for a second blob would only stall the round.

        A read whose reply was lost (Redis restarted under it, and the client sent it again)
        has still handed its entries to this consumer: a wait that finds nothing new looks
        for them among the consumer's pending entries, so the round does not wait them out.
        """
        self._ensure_group()
        wanted = set(slots)
        found: dict[int, Batch] = {}
        answered: set[int] = set()
        rejected: list[Rejection] = []
        seen: set[bytes] = set()  # the entries this call has read
        deadline = time.monotonic() + timeout_s
        cursor = "0"  # first what this consumer was given but never acknowledged
        while True:
            remaining = deadline - time.monotonic()
            block = None if cursor == "0" else max(1, int(min(remaining, 1.0) * 1000))
            reply = self._redis.xreadgroup(GROUP, consumer, {self._stream: cursor}, count=64,
                                           block=block)
            entries = reply[0][1] if reply else []
            if cursor == "0" and not entries:
                cursor = ">"
            elif cursor == ">" and not entries:
                entries = self._delivered_unread(consumer, seen)
            seen.update(entry_id for entry_id, _ in entries)
            for entry_id, fields in entries:
                batch, why = self._parse(entry_id, fields, schema)
                if why is None and batch.round != round:
                    why = f"batch of round {batch.round} read in round {round}"
                if why is None and batch.slot not in wanted:
                    why = f"slot {batch.slot} was not invoked in round {round}"
                if why is not None:
                    rejected.append(self._reject(entry_id, fields, why))
                    if batch.round == round:
                        answered.add(batch.slot)
                    continue
                if batch.slot in found:  # an actor retried after writing: keep the newest
                    rejected.append(self._reject(found[batch.slot].entry_id, fields,
                                                 "duplicate batch for this slot"))
                found[batch.slot] = batch
            if cursor == "0" and entries:
                cursor = entries[-1][0]  # page through the pending entries
            if wanted <= set(found) | answered or (cursor == ">" and time.monotonic() >= deadline):
                return [found[s] for s in sorted(found)], rejected

    def ack(self, batches: Collection[Batch], pipe: Pipeline) -> None:
        """Acknowledge and delete trained-on batches, in the caller's transaction (the one
        that publishes what was trained on them)."""
        ids = [b.entry_id for b in batches]
        if ids:
            pipe.xack(self._stream, GROUP, *ids)
            pipe.xdel(self._stream, *ids)

    def rejected(self, limit: int = 100) -> list[dict[str, object]]:
        return [json.loads(r) for r in self._redis.lrange(self._dead, 0, limit - 1)]

    def pending(self) -> int:
        try:
            return int(self._redis.xpending(self._stream, GROUP)["pending"])
        except ResponseError:
            return 0

    def _delivered_unread(self, consumer: str, seen: set[bytes]
                          ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """The entries given to ``consumer`` that it has not read: what a lost reply held."""
        pending = self._redis.xpending_range(self._stream, GROUP, "-", "+",
                                             count=len(seen) + 64, consumername=consumer)
        ids = [p["message_id"] for p in pending if p["message_id"] not in seen]
        return [reply[0] for reply in self._ranges(ids) if reply]

    def _ranges(self, entry_ids: Collection[str | bytes]) -> list[list[Any]]:
        """Per id, ``XRANGE`` of that one entry: ``[]`` where it is gone. One round trip."""
        if not entry_ids:
            return []
        with self._redis.pipeline(transaction=False) as pipe:
            for eid in entry_ids:
                pipe.xrange(self._stream, eid, eid)
            return pipe.execute()

    def _ensure_group(self) -> None:
        try:
            self._redis.xgroup_create(self._stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    @staticmethod
    def _parse(entry_id: bytes, fields: Mapping[bytes, bytes], schema: TrajectorySchema
               ) -> tuple[Batch, str | None]:
        eid = entry_id.decode()
        try:
            header = (int(fields[b"round"]), int(fields[b"slot"]), int(fields[b"version"]))
        except (KeyError, ValueError):
            return Batch(eid, -1, -1, -1, {}), "missing or non-integer round/slot/version"
        try:
            arrays, _ = decode_arrays(fields.get(b"data", b""))
        except CodecError as exc:
            return Batch(eid, *header, {}), f"data: {exc}"
        return Batch(eid, *header, arrays), schema.problem(arrays)

    def _reject(self, entry_id: str | bytes, fields: Mapping[bytes, bytes], reason: str
                ) -> Rejection:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id

        def num(key: bytes) -> int:
            try:
                return int(fields[key])
            except (KeyError, ValueError):
                return -1

        rejection = Rejection(eid, num(b"round"), num(b"slot"), reason)
        with self._redis.pipeline() as pipe:
            pipe.lpush(self._dead, json.dumps(rejection.to_dict()))
            pipe.ltrim(self._dead, 0, 99)
            pipe.xack(self._stream, GROUP, eid)
            pipe.xdel(self._stream, eid)
            pipe.execute()
        return rejection
