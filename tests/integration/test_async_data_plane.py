"""The data plane of asynchronous training against a real Redis: trajectory entries handed
out by key, the gradient stream and the learner registry."""

from __future__ import annotations

import pytest
import torch

from faasrl.algorithms import impact
from faasrl.data.gradients import GradientStream, LearnerRegistry
from faasrl.data.keys import gradients_key
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, policy_spec_for
from faasrl.rl.rollout import Rollout

JOB = "async-cache"


@pytest.fixture(scope="module")
def sequence_batch():
    """An IMPACT actor's batch of 3 envs and 40 steps, and its schema."""
    spec = policy_spec_for("CartPole-v1")
    rollout = Rollout(make_vec_env("CartPole-v1", 3, seed=0), ActorCritic(spec), num_steps=40,
                      gamma=0.99, seed=0)
    steps, _ = rollout.collect()
    return impact.actor_batch(steps, impact.Config()), impact.batch_schema(spec, 3)


def test_learners_read_the_entries_they_are_handed(r, sequence_batch):
    batch, schema = sequence_batch
    stream = TrajectoryStream(r, JOB)
    first, size = stream.append(0, 0, 3, batch)
    second, _ = stream.append(0, 1, 4, {**batch, "rewards": batch["rewards"][:5]})
    assert size > 0
    batches, rejected = stream.read_entries([first, second, "1-1"], schema)
    assert [(b.entry_id, b.slot, b.version, b.rows) for b in batches] == [(first, 0, 3, 120)]
    assert [x.reason for x in rejected][1] == "entry not in the stream"
    assert "row counts differ" in rejected[0].reason
    assert stream.rejected()[0]["entry"] == second  # dead-lettered with the reason
    stream.delete([first])
    assert stream.read_entries([first], schema)[0] == []


def test_gradient_push_unregisters_its_learner_atomically(r):
    registry, grads = LearnerRegistry(r, JOB), GradientStream(r, JOB)
    weights = {"w": torch.ones(3)}
    registry.register(0, 5, weights)
    registry.register(1, 5, {"w": torch.zeros(3)})
    registry.register(2, 4, {"w": torch.full((3,), 2.0)})
    assert registry.clocks() == {0: 5, 1: 5, 2: 4}
    # Peers on the caller's own clock have the same ratios: left out, not fetched.
    peers = registry.peers(0, skip_clock=5)
    assert [(p.slot, p.clock) for p in peers] == [(2, 4)]
    assert torch.equal(peers[0].weights["w"], torch.full((3,), 2.0))
    entry, _ = grads.push(0, 5, {"w": torch.tensor([0.5, -1.0, 2.0])}, {"loss": 1.5})
    assert registry.clocks() == {1: 5, 2: 4}
    (gradient,) = grads.read()
    assert (gradient.entry_id, gradient.learner, gradient.clock) == (entry, 0, 5)
    assert gradient.stats == {"loss": 1.5}
    assert torch.equal(gradient.tensors["w"], torch.tensor([0.5, -1.0, 2.0]))
    assert grads.read(after=entry) == []
    grads.delete([entry])
    assert len(grads) == 0
    registry.clear()
    assert registry.clocks() == {} and r.keys(f"faasrl:job:{JOB}:learners*") == []


def test_gradients_are_read_by_id_in_the_order_asked(r):
    grads = GradientStream(r, JOB)
    first, _ = grads.push(0, 1, {"w": torch.ones(2)})
    second, _ = grads.push(1, 2, {"w": torch.zeros(2)})
    junk = r.xadd(gradients_key(JOB), {"learner": 2, "clock": 0}).decode()
    grads.delete([first])
    got = grads.read_ids([second, "1-1", junk, first])
    assert [(g.entry_id, g.learner, g.clock) for g in got[:1]] == [(second, 1, 2)]
    assert got[1][0] == junk and "unreadable gradient entry" in got[1][1]
    assert len(got) == 2  # an id never pushed, and one deleted, are left out
