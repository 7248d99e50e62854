"""The actor function's handler against a real Redis: one warm container keeps the envs of
every job its memory allows, and says when it had to start a slot's envs afresh."""

from __future__ import annotations

import importlib.util
import sys
import time
from types import ModuleType

import pytest
import torch
from helpers import REPO

from faasrl.data.params import ParameterStore
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.runtime.server import Context

SPEC = PolicySpec((4,), "float32", "discrete", 2, hidden=(8,))  # the jobs' model: hidden [8]
JOBS = ("a", "b", "c")


@pytest.fixture
def actor(redis_url, r, monkeypatch) -> ModuleType:
    """A fresh actor module (a new container), with every job's version 0 published."""
    monkeypatch.setenv("FAASRL_REDIS_URL", redis_url)
    torch.manual_seed(0)
    for job in JOBS:
        ParameterStore(r, job).publish(0, ActorCritic(SPEC).state_dict())
    path = REPO / "functions" / "actor" / "handler.py"
    spec = importlib.util.spec_from_file_location("actor_handler", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def _rollout(actor: ModuleType, job: str, round_: int, memory_mb: int) -> bool:
    """One rollout of slot 0 of ``job``; whether it started envs."""
    args = {"mode": "rollout", "round": round_, "slot": 0, "version": 0,
            "job": {"id": job, "env_id": "CartPole-v1", "policy": SPEC.to_dict(), "seed": 1,
                    "envs_per_actor": 2, "steps_per_actor": 8,
                    "hyperparameters": {"algorithm": "ppo", "model": {"hidden": [8]}}}}
    context = Context("inv", "actor", memory_mb, time.monotonic() + 60)
    return actor.main(args, context)["envs_started"]


def test_a_container_keeps_the_envs_of_every_job_its_memory_allows(actor):
    """Three jobs take turns on one container (more than the two it used to keep): each
    slot finds its envs again, round after round."""
    for round_ in range(3):
        assert [_rollout(actor, job, round_, 2048) for job in JOBS] == [round_ == 0] * 3


def test_over_its_memory_a_container_drops_the_least_recently_used_jobs_state(actor):
    """With its heap over the share of its limit, each invocation drops one other job's
    state, the least recently used: that job's next rollout starts envs, and says so."""
    for job in JOBS:
        _rollout(actor, job, 0, 2048)
    assert _rollout(actor, "c", 1, 1) is False  # over: a's state goes, c keeps its own
    assert _rollout(actor, "a", 1, 2048) is True
    assert _rollout(actor, "b", 1, 2048) is False
