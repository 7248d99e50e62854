"""The cache against a real Redis: codec, versioned parameters, trajectory streams."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers import wait_for

from faasrl.algorithms import ppo
from faasrl.data.codec import (
    CodecError,
    decode_arrays,
    decode_optimizer,
    decode_tensors,
    encode_arrays,
    encode_optimizer,
    encode_tensors,
)
from faasrl.data.keys import job_key
from faasrl.data.params import MissingVersion, ParameterStore
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.policy import PolicySpec

SCHEMA = ppo.batch_schema(PolicySpec((4,), "float32", "discrete", 2), envs=4)


def batch(rows: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {"obs": rng.standard_normal((rows, 4)).astype(np.float32),
           "actions": rng.integers(0, 2, rows).astype(np.int64)}
    for key in ("logprobs", "values", "advantages", "returns"):
        out[key] = rng.standard_normal(rows).astype(np.float32)
    return out


# ------------------------------------------------------------------------- codec
def test_arrays_round_trip_with_metadata_and_lz4():
    frames = np.zeros((16, 4, 84, 84), dtype=np.uint8)
    frames[:, :, 10:20, 10:20] = 200
    arrays = {"obs": frames, "r": np.arange(5, dtype=np.float32)}
    plain = encode_arrays(arrays, metadata={"round": "3"})
    packed = encode_arrays(arrays, metadata={"round": "3"}, compress=True)
    assert len(packed) < len(plain) / 10  # mostly-constant frames compress well
    for blob in (plain, packed):
        out, meta = decode_arrays(blob)
        assert meta == {"round": "3"}
        assert all(np.array_equal(out[k], v) and out[k].dtype == v.dtype
                   for k, v in arrays.items())


def test_corrupt_blobs_are_codec_errors():
    for blob in (b"", b"garbage", b"\xff" * 8 + b"{}", b"\x04\x22\x4d\x18broken"):
        with pytest.raises(CodecError):
            decode_arrays(blob)


def test_tensors_and_optimizer_state_round_trip():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    tensors, meta = decode_tensors(encode_tensors(model.state_dict(), metadata={"v": "1"}))
    assert meta == {"v": "1"}
    assert all(torch.equal(tensors[k], v) for k, v in model.state_dict().items())
    state = decode_optimizer(encode_optimizer(opt.state_dict()))
    fresh = torch.optim.Adam(model.parameters(), lr=0.5)
    fresh.load_state_dict(state)
    assert fresh.param_groups[0]["lr"] == 1e-3
    for pid, values in opt.state_dict()["state"].items():
        for name, value in values.items():
            assert torch.equal(fresh.state_dict()["state"][pid][name], value)


# -------------------------------------------------------------------- parameters
def test_parameter_versions_latest_and_pruning(r):
    store = ParameterStore(r, "job1", keep=2)
    assert store.latest() is None
    for v in range(4):
        store.publish(v, {"w": torch.full((2,), float(v))})
    assert store.latest() == 3
    weights, meta = store.load()
    assert torch.equal(weights["w"], torch.full((2,), 3.0)) and meta["version"] == "3"
    assert torch.equal(store.load(2)[0]["w"], torch.full((2,), 2.0))
    with pytest.raises(MissingVersion, match="version 1"):
        store.load(1)


def test_optimizer_state_is_stored_with_its_version(r):
    store = ParameterStore(r, "job1")
    assert store.load_optimizer() is None
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(model.parameters())
    store.publish(7, model.state_dict(), optimizer=opt.state_dict())
    state, version = store.load_optimizer()
    assert version == 7 and state["param_groups"][0]["lr"] == opt.param_groups[0]["lr"]


# ------------------------------------------------------------------ trajectories
def test_round_is_read_and_acked(r):
    stream = TrajectoryStream(r, "job1")
    for slot in (0, 1):
        stream.put(round=0, slot=slot, version=0, arrays=batch(seed=slot))
    batches, rejected = stream.read_round(0, [0, 1], SCHEMA, timeout_s=2)
    assert [b.slot for b in batches] == [0, 1] and rejected == []
    assert np.array_equal(batches[1].arrays["obs"], batch(seed=1)["obs"])
    assert stream.pending() == 2
    with r.pipeline() as pipe:
        stream.ack(batches, pipe)
        pipe.execute()
    assert stream.pending() == 0
    assert r.xlen(job_key("job1", "trajectories")) == 0


def test_a_crashed_learner_loses_nothing(r):
    stream = TrajectoryStream(r, "job1")
    stream.put(0, 0, 0, batch())
    first, _ = stream.read_round(0, [0], SCHEMA, timeout_s=2)
    # the learner dies here, before ack; the next one gets the same batch
    again, _ = stream.read_round(0, [0], SCHEMA, timeout_s=2)
    assert [b.entry_id for b in again] == [b.entry_id for b in first]


def test_a_read_whose_reply_was_lost_does_not_stall_the_round(r):
    """Redis handed slot 1's batch to the learner in a reply that never arrived (it restarted,
    and the client's retry read nothing new): the round still gets it, without waiting out
    its timeout."""
    stream = TrajectoryStream(r, "job1")
    stream.put(0, 0, 0, batch())
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(stream.read_round, 0, [0, 1], SCHEMA, timeout_s=30)
        wait_for(lambda: stream.pending() == 1, what="slot 0 read, the learner waiting")
        with r.pipeline(transaction=True) as lost:  # delivered before the waiting read wakes
            lost.xadd(job_key("job1", "trajectories"),
                      {"round": 0, "slot": 1, "version": 0, "data": encode_arrays(batch(seed=1))})
            lost.xreadgroup("learners", "learner", {job_key("job1", "trajectories"): ">"})
            assert lost.execute()[1], "the transaction's read took the entry"
        started = time.monotonic()
        batches, rejected = reading.result(timeout=60)
    assert time.monotonic() - started < 5
    assert [b.slot for b in batches] == [0, 1] and rejected == []
    assert np.array_equal(batches[1].arrays["obs"], batch(seed=1)["obs"])


def test_missing_batches_wait_then_return_what_came(r):
    stream = TrajectoryStream(r, "job1")
    stream.put(0, 0, 0, batch())
    batches, rejected = stream.read_round(0, [0, 1], SCHEMA, timeout_s=0.3)
    assert [b.slot for b in batches] == [0] and rejected == []


@pytest.mark.parametrize(("arrays", "reason"), [
    ({**batch(), "obs": batch()["obs"].astype(np.float64)}, "obs: dtype float64"),
    ({**batch(), "obs": np.zeros((8, 5), np.float32)}, "obs: shape (8, 5)"),
    ({k: v for k, v in batch().items() if k != "returns"}, "missing ['returns']"),
    ({**batch(), "extra": np.zeros(8, np.float32)}, "unexpected ['extra']"),
    ({**batch(), "advantages": np.full(8, np.nan, np.float32)}, "advantages: contains NaN"),
    ({**batch(), "values": np.zeros(3, np.float32)}, "row counts differ"),
])
def test_malformed_batches_are_rejected_with_the_reason(r, arrays, reason):
    stream = TrajectoryStream(r, "job1")
    stream.put(0, 0, 0, arrays)
    stream.put(0, 1, 0, batch())
    started = time.monotonic()
    batches, rejected = stream.read_round(0, [0, 1], SCHEMA, timeout_s=60)
    assert time.monotonic() - started < 10  # slot 0 answered, badly: no waiting for more
    assert [b.slot for b in batches] == [1]
    assert len(rejected) == 1 and reason in rejected[0].reason, rejected
    assert stream.rejected()[0]["reason"] == rejected[0].reason
    assert stream.pending() == 1  # the rejected entry is acknowledged and gone


def test_corrupt_stale_foreign_and_duplicate_entries_are_rejected(r):
    stream = TrajectoryStream(r, "job1")
    key = job_key("job1", "trajectories")
    r.xadd(key, {"round": 0, "slot": 0, "version": 0, "data": b"not safetensors"})
    r.xadd(key, {"slot": 0, "data": b""})
    stream.put(round=3, slot=0, version=0, arrays=batch())  # an old round
    stream.put(round=4, slot=9, version=0, arrays=batch())  # a slot nobody invoked
    stream.put(round=4, slot=0, version=0, arrays=batch(seed=1))
    stream.put(round=4, slot=0, version=0, arrays=batch(seed=2))  # retried actor
    batches, rejected = stream.read_round(4, [0], SCHEMA, timeout_s=0.5)
    reasons = [x.reason for x in rejected]
    assert any(x.startswith("data:") for x in reasons)
    assert "missing or non-integer round/slot/version" in reasons
    assert "batch of round 3 read in round 4" in reasons
    assert "slot 9 was not invoked in round 4" in reasons
    assert "duplicate batch for this slot" in reasons
    assert len(batches) == 1 and np.array_equal(batches[0].arrays["obs"], batch(seed=2)["obs"])


def test_job_ids_are_checked():
    with pytest.raises(ValueError, match="letters, digits"):
        job_key("../etc", "x")
