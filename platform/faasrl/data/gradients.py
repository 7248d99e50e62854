"""Asynchronous learners' side of the cache: the gradient stream and the learner registry.

A learner registers the policy it computes on (its clock and its weights, so that peers can
evaluate the cross-learner importance ratios), computes a gradient, and pushes it to the job's
gradient stream as one safetensors blob with the clock it used and its learner id, unregistering
in the same transaction. The parameter function reads the stream in order, or the entries a
replaying workflow names by id; an entry stays in the stream until it has been aggregated (or
dropped), so a parameter function that restarts rebuilds its queue from the stream.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from redis import Redis

from faasrl.data.codec import CodecError, decode_tensors, encode_tensors
from faasrl.data.keys import gradients_key, learner_weights_key, learners_key
from faasrl.data.ops import unregister_learner


@dataclass
class Gradient:
    entry_id: str
    learner: int
    clock: int  # the weights version the learner computed on
    tensors: dict[str, torch.Tensor]
    stats: dict[str, Any]


@dataclass
class Peer:
    slot: int
    clock: int
    weights: dict[str, torch.Tensor]


class GradientStream:
    def __init__(self, redis: Redis, job_id: str):
        self._redis = redis
        self._job = job_id
        self._stream = gradients_key(job_id)

    def push(self, learner: int, clock: int, tensors: Mapping[str, torch.Tensor],
             stats: Mapping[str, Any] | None = None) -> tuple[str, int]:
        """Append a gradient and unregister its learner, atomically; returns (entry id, bytes)."""
        blob = encode_tensors(tensors, metadata={"learner": str(learner), "clock": str(clock)})
        with self._redis.pipeline() as pipe:
            pipe.xadd(self._stream, {"learner": learner, "clock": clock, "data": blob,
                                     "stats": json.dumps(dict(stats or {}))})
            unregister_learner(pipe, self._job, learner)
            entry = pipe.execute()[0]
        return entry.decode(), len(blob)

    def read(self, after: str | None = None, count: int = 256
             ) -> list[Gradient | tuple[str, str]]:
        """Entries after ``after`` (all when None), oldest first: a :class:`Gradient`, or
        (entry id, why) for an entry that cannot be decoded."""
        start = "-" if after is None else f"({after}"
        return [_decode(raw_id.decode(), fields)
                for raw_id, fields in self._redis.xrange(self._stream, start, "+", count=count)]

    def read_ids(self, entry_ids: Sequence[str]) -> list[Gradient | tuple[str, str]]:
        """The entries with these ids, in this order, decoded as :meth:`read` does; an id no
        longer in the stream (already aggregated or dropped) is left out."""
        with self._redis.pipeline(transaction=False) as pipe:
            for eid in entry_ids:
                pipe.xrange(self._stream, eid, eid)
            replies = pipe.execute()
        return [_decode(eid, reply[0][1]) for eid, reply in zip(entry_ids, replies, strict=True)
                if reply]

    def delete(self, entry_ids: Collection[str], pipe: Any = None) -> None:
        """Remove aggregated or dropped entries (on ``pipe`` when given, to commit with it)."""
        if entry_ids:
            (pipe or self._redis).xdel(self._stream, *entry_ids)

    def __len__(self) -> int:
        return int(self._redis.xlen(self._stream))

    def clear(self) -> None:
        self._redis.delete(self._stream)


def _decode(entry_id: str, fields: Mapping[bytes, bytes]) -> Gradient | tuple[str, str]:
    try:
        learner, clock = int(fields[b"learner"]), int(fields[b"clock"])
        tensors, _ = decode_tensors(fields[b"data"])
        stats = json.loads(fields.get(b"stats", b"{}"))
    except (KeyError, ValueError, CodecError) as exc:
        return entry_id, f"unreadable gradient entry: {exc}"
    return Gradient(entry_id, learner, clock, tensors, stats)


class LearnerRegistry:
    """Which learners are computing, on which clock, with which weights."""

    def __init__(self, redis: Redis, job_id: str):
        self._redis = redis
        self._job = job_id

    def register(self, slot: int, clock: int, weights: Mapping[str, torch.Tensor]) -> None:
        with self._redis.pipeline() as pipe:
            pipe.set(learner_weights_key(self._job, slot),
                     encode_tensors(weights, metadata={"clock": str(clock)}))
            pipe.hset(learners_key(self._job), str(slot), clock)
            pipe.execute()

    def unregister(self, slot: int) -> None:
        with self._redis.pipeline() as pipe:
            unregister_learner(pipe, self._job, slot)
            pipe.execute()

    def clocks(self) -> dict[int, int]:
        """Registered learner slots and the clocks they compute on."""
        return {int(k): int(v) for k, v in self._redis.hgetall(learners_key(self._job)).items()}

    def peers(self, slot: int, skip_clock: int | None = None) -> list[Peer]:
        """The other registered learners' policies; those on ``skip_clock`` (the caller's own
        policy, so the same ratios) are left out without fetching their weights."""
        wanted = [(s, c) for s, c in sorted(self.clocks().items())
                  if s != slot and c != skip_clock]
        if not wanted:
            return []
        blobs = self._redis.mget([learner_weights_key(self._job, s) for s, _ in wanted])
        return [Peer(s, c, decode_tensors(blob)[0])
                for (s, c), blob in zip(wanted, blobs, strict=True) if blob is not None]

    def clear(self) -> None:
        slots = self.clocks()
        with self._redis.pipeline() as pipe:
            pipe.delete(learners_key(self._job))
            for s in slots:
                unregister_learner(pipe, self._job, s)
            pipe.execute()
