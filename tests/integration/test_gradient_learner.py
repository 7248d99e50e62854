"""The learner's gradient mode against a real Redis: the policy version and the peers it
computes with, taken from the newest published and the learner registry, or pinned by the
workflow (what a replayable run needs)."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
from helpers import handler_module

from faasrl.algorithms import ppo
from faasrl.data.gradients import GradientStream, LearnerRegistry
from faasrl.data.params import ParameterStore
from faasrl.data.trajectories import TrajectoryStream
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.rl.rollout import Rollout
from faasrl.runtime.invalid import InvalidArgs

JOB = "gradient-test"
SPEC = PolicySpec((4,), "float32", "discrete", 2, hidden=(8,))  # the job's model: hidden [8]
ENVS = 4


def _policy(seed: int) -> ActorCritic:
    torch.manual_seed(seed)
    return ActorCritic(SPEC)


@pytest.fixture
def learner(redis_url, monkeypatch) -> ModuleType:
    monkeypatch.setenv("FAASRL_REDIS_URL", redis_url)
    return handler_module("learner", "learner_handler_gradient")


@pytest.fixture
def entry(r) -> str:
    """A PPO actor's batch sampled by version 0, in the job's trajectory stream; versions 0
    and 1 (other weights) published."""
    store = ParameterStore(r, JOB)
    for version in (0, 1):
        store.publish(version, _policy(version).state_dict())
    rollout = Rollout(make_vec_env("CartPole-v1", ENVS, seed=0), _policy(0), num_steps=16,
                      gamma=0.99, seed=0)
    steps, _ = rollout.collect()
    return TrajectoryStream(r, JOB).append(0, 0, 0, ppo.actor_batch(steps, ppo.Config()))[0]


def _gradient(learner: ModuleType, r, entry: str, slot: int = 0, **pins) -> tuple[dict, dict]:
    """One gradient of learner ``slot`` on the batch: its result, and the tensors it pushed."""
    job = {"id": JOB, "env_id": "CartPole-v1", "policy": SPEC.to_dict(), "seed": 1,
           "envs_per_actor": ENVS, "steps_per_actor": 16,
           "hyperparameters": {"algorithm": "ppo", "model": {"hidden": [8]}}}
    out = learner.main({"mode": "gradient", "job": job, "slot": slot, "entries": [entry],
                        **pins}, None)
    (pushed,) = GradientStream(r, JOB).read_ids([out["entry"]])
    assert (pushed.entry_id, pushed.learner, pushed.clock) == (out["entry"], slot, out["clock"])
    return out, pushed.tensors


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_learner_computes_on_the_version_it_is_given_even_once_a_newer_one_is_out(
        learner, r, entry):
    newest, on_newest = _gradient(learner, r, entry)
    assert newest["clock"] == 1 and newest["pushed"]
    pinned, on_pinned = _gradient(learner, r, entry, version=0)
    assert pinned["clock"] == 0
    ParameterStore(r, JOB).publish(2, _policy(2).state_dict())
    again, on_again = _gradient(learner, r, entry, version=0)  # from the container's cache
    assert again["clock"] == 0 and _same(on_again, on_pinned)
    assert not _same(on_pinned, on_newest)
    # A new container, given version 0 as the newest, computes the same gradient.
    ParameterStore(r, JOB).publish(3, _policy(0).state_dict())
    cold = handler_module("learner", "learner_handler_cold")
    assert _same(_gradient(cold, r, entry)[1], on_pinned)


def test_a_version_no_longer_kept_is_refused_naming_it(learner, r, entry):
    store = ParameterStore(r, JOB, keep=2)
    store.publish(2, _policy(2).state_dict())  # evicts version 0
    with pytest.raises(InvalidArgs, match="version 0 is no longer kept") as err:
        _gradient(learner, r, entry, version=0)
    assert err.value.field == "version"
    with pytest.raises(InvalidArgs) as err:
        _gradient(learner, r, entry, version=2, peers={1: 1, 3: 0})
    assert err.value.field == "peers.3"
    assert LearnerRegistry(r, JOB).clocks() == {}  # the failed learner left no entry


def test_pinned_peers_are_the_published_versions_they_name_not_the_registry(
        learner, r, entry):
    registry = LearnerRegistry(r, JOB)
    registry.register(1, 0, _policy(0).state_dict())  # a peer computing on version 0
    by_registry, g_registry = _gradient(learner, r, entry)
    assert by_registry["stats"]["peers"] == 1
    # The same peer, named: version 0's published weights, the same gradient.
    named, g_named = _gradient(learner, r, entry, peers={1: 0})
    assert named["stats"] == by_registry["stats"] and _same(g_named, g_registry)
    # None named: no peers, whatever the registry holds; the ratios change.
    alone, g_alone = _gradient(learner, r, entry, peers={})
    assert alone["stats"]["peers"] == 0 and not _same(g_alone, g_registry)
    # The learner's own slot, and peers on its own clock (the same ratios), are left out.
    mine, g_mine = _gradient(learner, r, entry, peers={0: 0, 2: 1, 3: 0})
    assert mine["stats"]["peers"] == 1 and _same(g_mine, g_named)
    assert registry.clocks() == {1: 0}  # pinned learners neither read nor take its entries
