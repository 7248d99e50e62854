"""The buffer function: a job's replay memory, kept warm next to its actors (the long-haul
paper's buffer node), so that only sampled batches travel to the learner.

    args: faasrl.contracts.IngestArgs | SampleArgs (``mode``)
    result: IngestResult | SampleResult

``ingest`` moves the actors' transition entries (each with the |δ| its actor computed) from the
job's stream into the memory (:class:`faasrl.rl.replay.ReplayMemory`: a FIFO ring under a sum
tree); a blob that does not match the job's transition layout goes to the dead-letter list with
the reason and is never sampled. ``sample`` first applies the priorities the learner computed
on its last batches (an update for a slot overwritten since is dropped), then draws
``batches`` batches into one safetensors blob the learner reads.

The memory is snapshotted to Redis every ``snapshot_every`` inserts or ``snapshot_s`` seconds.
A container that finds no memory for the job (a replaced one, a new gateway) restores the
snapshot and reports what the driver saw acknowledged since it as ``lost``. The driver calls
one buffer at a time per job, always with the same affinity, so one container holds it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faasrl.algorithms.offpolicy import SAMPLE_KEYS, TRANSITION_KEYS, transition_layout
from faasrl.contracts import BUFFER_ARGS, IngestArgs, IngestResult, JobContext, SampleResult, parse
from faasrl.data.codec import decode_arrays, encode_arrays
from faasrl.data.connection import function_redis
from faasrl.data.keys import buffer_snapshot_key, samples_key
from faasrl.data.trajectories import TrajectorySchema, TrajectoryStream
from faasrl.rl.policy import PolicySpec
from faasrl.rl.replay import ReplayMemory

SNAPSHOT_PART = 64 * 2**20  # bytes per Redis value of a snapshot (a string holds 512 MiB)
SAMPLE_TTL_S = 600  # a sampled blob no learner read expires


@dataclass
class _Memory:
    replay: ReplayMemory
    rng: np.random.Generator
    inserted: int = 0  # transitions ever added
    snapshot_inserted: int = 0
    snapshot_at: float = field(default_factory=time.monotonic)


_memories: dict[str, _Memory] = {}


def _schema(job: JobContext) -> TrajectorySchema:
    spec = PolicySpec.from_dict(job.policy_spec())
    return TrajectorySchema(fields=transition_layout(spec.obs_shape, spec.obs_dtype,
                                                     spec.action_shape, spec.action_dtype))


def _memory(job: JobContext, r: Any) -> tuple[_Memory, bool]:
    """The job's memory: this container's, else (True: new here) the snapshot's, else empty."""
    if job.id in _memories:
        return _memories[job.id], False
    cfg = job.hyperparameters
    memory = _Memory(ReplayMemory(cfg.memory_size, alpha=cfg.alpha, epsilon=cfg.priority_epsilon),
                     rng=np.random.default_rng(job.seed))
    manifest = r.get(buffer_snapshot_key(job.id))
    if manifest is not None:
        meta = json.loads(manifest)
        parts = r.mget([buffer_snapshot_key(job.id, i) for i in range(meta["parts"])])
        if any(p is None for p in parts):
            raise RuntimeError(f"buffer snapshot of job {job.id}: a part is missing")
        state, _ = decode_arrays(b"".join(parts))
        memory.replay.load(state)
        memory.inserted = memory.snapshot_inserted = int(meta["inserted"])
    _memories[job.id] = memory
    return memory, True


def _snapshot_due(job: JobContext, memory: _Memory) -> bool:
    cfg = job.hyperparameters
    return (memory.inserted - memory.snapshot_inserted >= cfg.snapshot_every
            or time.monotonic() - memory.snapshot_at >= cfg.snapshot_s) \
        and memory.inserted > memory.snapshot_inserted


def _snapshot(job: JobContext, r: Any, memory: _Memory) -> float:
    """Write the memory to Redis: its parts, then the manifest naming them (one transaction)."""
    t0 = time.monotonic()
    blob = encode_arrays(memory.replay.state(), compress=job.compress)
    parts = [blob[i:i + SNAPSHOT_PART] for i in range(0, len(blob), SNAPSHOT_PART)] or [b""]
    with r.pipeline(transaction=True) as pipe:
        for i, part in enumerate(parts):
            pipe.set(buffer_snapshot_key(job.id, i), part)
        pipe.set(buffer_snapshot_key(job.id), json.dumps({"parts": len(parts),
                                                          "inserted": memory.inserted}))
        pipe.execute()
    memory.snapshot_inserted, memory.snapshot_at = memory.inserted, time.monotonic()
    return time.monotonic() - t0


def ingest(call: IngestArgs, r: Any, memory: _Memory) -> tuple[int, list[dict[str, Any]]]:
    stream = TrajectoryStream(r, call.job.id)
    batches, rejected = stream.read_entries(call.entries, _schema(call.job))
    added = 0
    for batch in batches:
        arrays = {k: batch.arrays[k] for k in TRANSITION_KEYS}
        memory.replay.add(arrays, priorities=arrays["priorities"])
        added += batch.rows
    memory.inserted += added
    stream.delete(call.entries)
    return added, [x.to_dict() for x in rejected]


def main(args: dict[str, Any], context: Any) -> dict[str, Any]:
    call = parse(BUFFER_ARGS, args, "buffer args")
    job, t0 = call.job, time.monotonic()
    r = function_redis(job.model_dump(include={"redis"}))
    memory, fresh = _memory(job, r)
    restored = fresh and call.inserted > 0  # the job's memory was elsewhere: what came back?
    lost = max(0, call.inserted - memory.inserted) if restored else 0
    # The lost ones still count as taken in: the driver's replay ratio goes on from its own
    # count, and a later restore counts only what it loses itself.
    memory.inserted += lost
    replay = memory.replay
    common: dict[str, Any] = {"restored": restored, "lost": lost}
    if isinstance(call, IngestArgs):
        added, rejected = ingest(call, r, memory)
        snapshot_s = _snapshot(job, r, memory) if _snapshot_due(job, memory) else None
        return IngestResult(size=len(replay), inserted=memory.inserted, snapshot_s=snapshot_s,
                            bytes_per_transition=replay.bytes_per_transition,
                            run_s=time.monotonic() - t0, added=added, rejected=rejected,
                            **common).model_dump(mode="json")

    applied = stale = 0
    if call.priorities is not None and (raw := r.get(call.priorities)) is not None:
        update, _ = decode_arrays(raw)
        applied = replay.update_priorities(update["slots"], update["generations"],
                                           update["priorities"])
        stale = len(update["slots"]) - applied
        r.delete(call.priorities)
    if len(replay) == 0:  # nothing survived: the workflow lets the actors fill it again
        return SampleResult(size=0, inserted=memory.inserted, snapshot_s=None,
                            bytes_per_transition=replay.bytes_per_transition,
                            run_s=time.monotonic() - t0, key=None, rows=0, bytes=0,
                            priority_mean=None, priorities_applied=applied,
                            priorities_stale=stale, **common).model_dump(mode="json")
    rows = call.batches * job.hyperparameters.batch_size
    drawn = replay.sample(rows, call.beta, memory.rng)
    arrays = {k: v for k, v in drawn.arrays.items() if k != "priorities"}
    arrays.update(zip(SAMPLE_KEYS, (drawn.weights, drawn.slots, drawn.generations),
                      strict=True))
    blob = encode_arrays(arrays, compress=job.compress)
    key = samples_key(job.id, uuid.uuid4().hex[:12])
    r.set(key, blob, ex=SAMPLE_TTL_S)
    return SampleResult(size=len(replay), inserted=memory.inserted, snapshot_s=None,
                        bytes_per_transition=replay.bytes_per_transition,
                        run_s=time.monotonic() - t0, key=key, rows=rows, bytes=len(blob),
                        priority_mean=float(np.mean(drawn.priorities)),
                        priorities_applied=applied, priorities_stale=stale,
                        **common).model_dump(mode="json")
