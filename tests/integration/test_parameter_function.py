"""The parameter function's handler against a real Redis: queueing, liveness, flushes, drops,
and a cold container rebuilding its queue from the gradient stream."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import handler_module

from faasrl.data.gradients import GradientStream, LearnerRegistry
from faasrl.data.keys import parameter_state_key
from faasrl.data.params import ParameterStore
from faasrl.rl.policy import ActorCritic, PolicySpec

JOB = "pf-test"
SPEC = PolicySpec((4,), "float32", "discrete", 2, hidden=(8,))  # the job's model: hidden [8]


@pytest.fixture
def handler(redis_url, monkeypatch):
    monkeypatch.setenv("FAASRL_REDIS_URL", redis_url)
    return handler_module("parameter", "parameter_handler")


@pytest.fixture
def r(r):
    """conftest's Redis client, with the job's version 0 published."""
    torch.manual_seed(0)
    ParameterStore(r, JOB).publish(0, ActorCritic(SPEC).state_dict())
    return r


def _args(mode: str, rule: dict, learners: int = 3, **kw) -> dict:
    job = {"id": JOB, "env_id": "CartPole-v1", "policy": SPEC.to_dict(), "seed": 1,
           "envs_per_actor": 4, "steps_per_actor": 32,
           "hyperparameters": {"algorithm": "ppo", "learning_rate": 1e-2, "anneal_lr": False,
                               "model": {"hidden": [8]}}}
    return {"mode": mode, "job": job, "round": 1, "session": "s1", "total_rounds": 10,
            "learners": learners, "aggregation": rule, "optimizer_step": "weighted_mean",
            "keep": 8, **kw}


def _push(r, learner: int, clock: int, value: float = 1.0) -> None:
    grads = {n: torch.full_like(p, value) for n, p in ActorCritic(SPEC).named_parameters()}
    GradientStream(r, JOB).push(learner, clock, grads)


def _stellaris_at(r, round_: int, delta_max: float, decay: float = 0.5) -> dict:
    r.set(parameter_state_key(JOB), json.dumps(
        {"rule": {"round": round_, "delta_max": delta_max, "seen": []}}))
    return {"rule": "stellaris", "decay": decay, "root": 3.0, "delta_max": "max"}


def test_stale_gradients_wait_then_liveness_and_the_round_end_flush_aggregate_them(handler, r):
    rule = _stellaris_at(r, 1, 1.0)  # β_1 = 0.5
    _push(r, 0, 0)
    out = handler.main(_args("step", rule), None)
    assert (out["clock"], out["queued"]) == (1, 0)  # staleness 0 ≤ 0.5
    _push(r, 1, 0)
    _push(r, 2, 0)
    out = handler.main(_args("step", rule), None)
    assert (out["clock"], out["queued"]) == (1, 2)  # mean staleness 1 > 0.5: waiting
    # No more gradients come: stepping again changes nothing ...
    assert handler.main(_args("step", rule), None)["queued"] == 2
    # ... until the queue holds as many as there are learners ...
    _push(r, 0, 0)
    out = handler.main(_args("step", rule), None)
    assert (out["clock"], out["queued"]) == (2, 0)
    # ... or the round ends.
    _push(r, 1, 0)
    out = handler.main(_args("flush", rule), None)
    assert out["clock"] == 3 and out["queued"] == 1
    assert out["reasons"] == {"threshold": 1, "liveness": 1, "round end": 1}
    assert out["gradients_aggregated"] == 5 and out["staleness_max"] == 2
    assert out["staleness_mean"] == pytest.approx((0 + 1 + 1 + 1 + 2) / 5)
    assert out["threshold"] == 0.5 and out["next_threshold"] == 0.25
    assert len(GradientStream(r, JOB)) == 0
    assert ParameterStore(r, JOB).latest() == 3
    assert ParameterStore(r, JOB).load_optimizer()[1] == 3  # optimizer saved with the weights
    state = json.loads(r.get(parameter_state_key(JOB)))
    assert state["rule"]["round"] == 2


def test_a_cold_parameter_function_rebuilds_its_queue_from_the_stream(handler, r):
    rule = _stellaris_at(r, 1, 1.0)
    _push(r, 0, 0)
    handler.main(_args("step", rule), None)
    _push(r, 1, 0)
    assert handler.main(_args("step", rule), None)["queued"] == 1
    handler._servers.clear()  # the warm container is gone
    out = handler.main(_args("flush", rule), None)
    assert out["clock"] == 2 and out["gradients_aggregated"] == 2
    assert out["reasons"] == {"threshold": 1, "round end": 1}


def test_round_zero_bootstraps_delta_max(handler, r):
    rule = {"rule": "stellaris", "decay": 0.96, "root": 3.0, "delta_max": "max"}
    for learner, clock in ((0, 0), (1, 0), (2, 0)):
        _push(r, learner, clock)
    out = handler.main(_args("flush", rule), None)
    assert out["reasons"] == {"bootstrap": 3} and out["staleness_max"] == 2
    assert out["threshold"] is None and out["next_threshold"] == pytest.approx(2 * 0.96)


def test_unreadable_and_non_finite_gradients_are_dropped(handler, r):
    _push(r, 0, 0, value=float("nan"))
    GradientStream(r, JOB)._redis.xadd(f"faasrl:job:{JOB}:gradients",
                                       {"learner": 1, "clock": 0, "data": b"junk"})
    out = handler.main(_args("flush", {"rule": "async"}), None)
    assert out["gradients_dropped"] == 2 and out["clock"] == 0
    assert len(GradientStream(r, JOB)) == 0


def test_ssp_drops_a_gradient_staler_than_s(handler, r):
    for _ in range(2):
        _push(r, 0, ParameterStore(r, JOB).latest())
        handler.main(_args("step", {"rule": "ssp", "s": 1}), None)
    _push(r, 1, 0)
    out = handler.main(_args("flush", {"rule": "ssp", "s": 1}), None)
    assert out["clock"] == 2 and out["gradients_dropped"] == 1
    assert len(GradientStream(r, JOB)) == 0


def test_ssp_waits_for_a_learner_still_computing_on_an_old_clock(handler, r):
    LearnerRegistry(r, JOB).register(5, 0, ActorCritic(SPEC).state_dict())  # a slow learner
    rule = {"rule": "ssp", "s": 1}
    _push(r, 0, 0)
    assert handler.main(_args("step", rule), None)["clock"] == 1  # the slow one: 1 behind
    _push(r, 1, 1)
    out = handler.main(_args("step", rule), None)
    assert (out["clock"], out["queued"]) == (1, 1)  # one more would leave it 2 behind
    LearnerRegistry(r, JOB).unregister(5)
    _push(r, 2, 1)
    assert handler.main(_args("step", rule), None)["clock"] == 2


def test_softsync_and_per_gradient_steps(handler, r):
    rule = {"rule": "softsync", "k": 2}
    _push(r, 0, 0)
    assert handler.main(_args("step", rule), None)["queued"] == 1
    _push(r, 1, 0)
    before = ParameterStore(r, JOB).load()[0]
    out = handler.main(_args("step", rule, optimizer_step="per_gradient"), None)
    assert (out["clock"], out["queued"]) == (1, 0)
    after = ParameterStore(r, JOB).load()[0]
    # Two Adam steps of lr 0.01 on a constant positive gradient: every weight moved down.
    moved = after["actor.0.weight"] - before["actor.0.weight"]
    assert torch.all(moved < -0.015)


def _entries(r, *values: float, clock: int = 0) -> list[str]:
    """Gradients of learners 0, 1, ... on ``clock``, each a constant ``value``: their ids."""
    grads = [{n: torch.full_like(p, v) for n, p in ActorCritic(SPEC).named_parameters()}
             for v in values]
    return [GradientStream(r, JOB).push(i, clock, g)[0] for i, g in enumerate(grads)]


def test_a_step_given_gradients_takes_exactly_those_in_that_order(handler, r):
    up, down, other = _entries(r, -1.0, 1.0, 1.0)
    before = ParameterStore(r, JOB).load()[0]["actor.0.weight"]
    # SSP with s = 0: the first taken is aggregated, the second (now 1 stale) dropped.
    out = handler.main(_args("flush", {"rule": "ssp", "s": 0}, gradients=[up, down]), None)
    assert (out["clock"], out["gradients_aggregated"], out["gradients_dropped"]) == (1, 1, 1)
    moved = ParameterStore(r, JOB).load()[0]["actor.0.weight"] - before
    assert torch.all(moved > 0)  # the negative gradient was the one applied
    (left,) = GradientStream(r, JOB).read()
    assert left.entry_id == other  # not named: still in the stream, for a later step
    assert handler._servers[JOB].cursor is None
    # Named again (a retried step), with an id never pushed: what is gone is skipped.
    out = handler.main(_args("step", {"rule": "ssp", "s": 0}, gradients=[up, "1-1"]), None)
    assert (out["clock"], out["queued"]) == (1, 0)


def test_a_retried_step_and_a_cold_container_take_each_named_gradient_once(handler, r):
    rule = {"rule": "softsync", "k": 2}
    first, second, _ = _entries(r, 1.0, 1.0, 1.0)
    assert handler.main(_args("step", rule, gradients=[first]), None)["queued"] == 1
    # The answer was lost and the workflow asks again: the gradient is not queued twice.
    assert handler.main(_args("step", rule, gradients=[first]), None)["queued"] == 1
    handler._servers.clear()  # the warm container is gone: its queue is in Redis
    out = handler.main(_args("flush", rule, gradients=[second]), None)
    assert (out["clock"], out["queued"], out["gradients_aggregated"]) == (1, 0, 2)
    assert out["reasons"] == {"k gradients": 1}
    assert len(GradientStream(r, JOB)) == 1  # the third, never named


def test_in_flight_given_overrides_the_registry(handler, r):
    LearnerRegistry(r, JOB).register(5, 0, ActorCritic(SPEC).state_dict())  # a slow learner
    rule = {"rule": "ssp", "s": 1}
    a, b = _entries(r, 1.0, 1.0)
    # The registry's slow learner would make SSP wait after the first aggregation: not read.
    out = handler.main(_args("step", rule, gradients=[a, b], in_flight=[]), None)
    assert (out["clock"], out["queued"]) == (2, 0)
    LearnerRegistry(r, JOB).unregister(5)
    # A learner still on clock 1, though none is registered: one more would leave it 2 behind.
    (c,) = _entries(r, 1.0, clock=2)
    out = handler.main(_args("step", rule, gradients=[c], in_flight=[1]), None)
    assert (out["clock"], out["queued"]) == (2, 1)


def test_a_warm_container_behind_another_ones_queue_rebuilds_from_redis(handler, r):
    """Container A queues a gradient; the next step goes to container B (A was busy), which
    queues another without publishing; back on A, the clock is unchanged but A's queue is
    stale: it must take B's state, not lose the gradient B queued."""
    rule = {"rule": "softsync", "k": 3}
    first, second, third = _entries(r, 1.0, 1.0, 1.0)
    assert handler.main(_args("step", rule, gradients=[first]), None)["queued"] == 1
    container_a = dict(handler._servers)
    handler._servers.clear()  # container B: cold, rebuilt from Redis
    assert handler.main(_args("step", rule, gradients=[second]), None)["queued"] == 2
    handler._servers.clear()
    handler._servers.update(container_a)  # back on A, whose clock is still the newest
    out = handler.main(_args("flush", rule, gradients=[third]), None)
    assert (out["clock"], out["gradients_aggregated"]) == (1, 3)
