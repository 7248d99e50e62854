"""Actor-scaling controllers: every formula and guard against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import error_fields
from pydantic import ValidationError

from faasrl.controllers import RoundContext, build_controller
from faasrl.controllers.actor_schedule import ActorSchedule
from faasrl.controllers.base import affordable_actors
from faasrl.controllers.kungfu import KungFu
from faasrl.controllers.minions import (
    OUTPUT_BIAS,
    Minions,
    MinionsAdapt,
    SchedulerPolicy,
    round_reward,
    scheduler_state,
    terminal_penalty,
)
from faasrl.controllers.nitro import Nitro, boosting_score, convexity_ratio, scaled_actors
from faasrl.controllers.saved_schedulers import (
    SchedulerNotFound,
    delete_scheduler,
    list_schedulers,
    load_scheduler,
    save_scheduler,
)
from faasrl.jobs.spec import JobSpec


def ctx(k: int, history: list[dict] | None = None, **kw) -> RoundContext:
    return RoundContext(k, history or [], **kw)


# ------------------------------------------------------------------------- nitro
def test_convexity_ratio_and_its_guards():
    assert convexity_ratio(-0.5, 1.0) == 2.0  # R = -(1.0)/(-0.5)
    assert convexity_ratio(-2.0, 0.5) == 0.25
    assert convexity_ratio(0.0, 1.0) is None  # lambda_min >= 0: convex, no boosting signal
    assert convexity_ratio(0.1, 1.0) is None
    assert convexity_ratio(-1.0, 0.0) is None  # lambda_max <= 0: R meaningless
    assert convexity_ratio(-1.0, math.inf) is None  # not finite
    assert convexity_ratio(math.nan, 1.0) is None
    assert convexity_ratio(None, 1.0) is None


def test_boosting_score_hand_computed():
    # (R_max - R_k) / (R_max - R_min) * d^k = (3 - 2.5) / (3 - 1) * 0.96^3
    assert boosting_score([2.0, 3.0, 1.0, 2.5], 3, 0.96) == pytest.approx(0.25 * 0.884736)
    assert boosting_score([2.0, 3.0, 1.0], 3, 0.96) == pytest.approx(0.884736)  # R_k = R_min
    assert boosting_score([2.0, 3.0], 7, 0.96) == 0.0  # R_k = R_max: no boost
    assert boosting_score([2.0], 5, 0.96) == 1.0  # guard: a single value
    assert boosting_score([], 5, 0.96) == 1.0
    assert boosting_score([1.5, 1.5, 1.5], 5, 0.96) == 1.0  # guard: R_max = R_min
    # decay: the same window position scores less later in training
    assert boosting_score([1.0, 3.0, 2.0], 10, 0.9) == pytest.approx(0.5 * 0.9**10)


def test_scaled_actors_floor_and_clip():
    assert scaled_actors(0.221184, 8, 64) == 14  # floor(64 * 0.221184) = floor(14.16)
    assert scaled_actors(0.05, 8, 64) == 8  # floor(3.2) clipped up to I_min
    assert scaled_actors(1.0, 8, 64) == 64
    assert scaled_actors(0.0, 8, 64) == 8
    assert scaled_actors(0.999, 1, 4) == 3  # floor, not round


def rows_with_ratios(ratios: list[float | None]) -> list[dict]:
    return [{"round": i, "actors": 8, "hessian_ratio": r, "cost_actors": 0.0,
             "cost_learner": 0.0} for i, r in enumerate(ratios)]


def test_nitro_decisions_over_a_job():
    nitro = Nitro(min_actors=8, max_actors=64, window=3, decay=0.96)
    assert nitro.actors(ctx(0)) == 64  # no update yet: empty window, S = 1
    assert nitro.explain()["score"] == 1.0
    assert nitro.actors(ctx(1, rows_with_ratios([2.0]))) == 64  # one value: S = 1
    # k = 3 updates; window of the last 3 valid values [3.0, 1.0, 2.5]... R_k = 2.5
    hist = rows_with_ratios([2.0, 3.0, 1.0, 2.5])
    assert nitro.actors(ctx(4, hist)) == math.floor(64 * (0.5 / 2.0) * 0.96**4)
    assert nitro.explain()["window"] == [3.0, 1.0, 2.5] and nitro.explain()["k"] == 4
    # R_k at the window's minimum: boost, decayed
    assert nitro.actors(ctx(3, rows_with_ratios([2.0, 3.0, 1.0]))) == \
        math.floor(64 * 0.96**3)
    # the last update gave no signal (lambda_min >= 0): S = 0 -> I_min; invalid Rs stay out
    assert nitro.actors(ctx(3, rows_with_ratios([2.0, 1.0, None]))) == 8
    assert nitro.explain()["score"] == 0.0
    assert nitro.actors(ctx(4, rows_with_ratios([3.0, None, 1.0, 2.0]))) == \
        math.floor(64 * 0.5 * 0.96**4)  # window [3, 1, 2], skipping the None
    assert nitro.learner_requests() == {"hessian": {"samples": 1024, "iterations": 20}}


def test_budget_cap_predicts_the_round_cost():
    # last round: 4 actors cost 0.4 (0.1 each), the learner 0.2
    last = {"actors": 4, "cost_actors": 0.4, "cost_learner": 0.2}
    # n <= 4: n * 0.1 + 0.2; n > 4: n * 0.1 + 0.2 * n / 4
    assert affordable_actors(ctx(1, [last], budget_left_usd=0.55), 8) == 3  # 0.5 <= 0.55
    assert affordable_actors(ctx(1, [last], budget_left_usd=1.21), 8) == 8  # 0.8 + 0.4
    assert affordable_actors(ctx(1, [last], budget_left_usd=1.19), 8) == 7  # 0.7 + 0.35
    assert affordable_actors(ctx(1, [last], budget_left_usd=0.25), 8) == 0  # not even one
    assert affordable_actors(ctx(1, [last], budget_left_usd=None), 8) == 8  # no budget
    assert affordable_actors(ctx(0, [], budget_left_usd=0.01), 8) == 8  # nothing to predict
    hist = [{**r, **last} for r in rows_with_ratios([2.0])]
    nitro = Nitro(min_actors=2, max_actors=8)
    assert nitro.actors(ctx(1, hist, budget_left_usd=0.55)) == 3
    assert nitro.explain()["budget_capped"] and nitro.explain()["wanted"] == 8
    assert nitro.actors(ctx(1, hist, budget_left_usd=0.25)) == 0  # the job ends
    assert Nitro(min_actors=2, max_actors=8, budget_cap=False).actors(
        ctx(1, hist, budget_left_usd=0.25)) == 8
    assert nitro.forecast(ctx(1, hist, budget_left_usd=0.55)) == 3


# ------------------------------------------------------------- kungfu, hydrozoa
def test_kungfu_scales_with_the_noise_scale_and_never_down():
    kf = KungFu(min_actors=2, max_actors=10)
    assert kf.actors(ctx(0)) == 2
    gns = [None, 100.0, 160.0, 50.0, -3.0, 240.0, 1000.0]
    # anchor (2 actors, 100): 160 -> round(3.2) = 3; 50 -> keep 3; -3 skipped; 240 -> round(4.8)
    # = 5; 1000 -> 20 clipped to 10
    expected = [2, 2, 3, 3, 3, 5, 10]
    for k, want in enumerate(expected):
        assert kf.actors(ctx(k + 1, [{"gns": g} for g in gns[:k + 1]])) == want, k
    assert kf.forecast(ctx(3)) == 10
    assert kf.learner_requests() == {"gns": {"parts": 4}}


def hydrozoa(**fields) -> ActorSchedule:
    spec = JobSpec(env_id="CartPole-v1", controller={"name": "hydrozoa", **fields})
    return build_controller(spec.controller)


def test_hydrozoa_doubles_on_schedule():
    h = hydrozoa(start=1, every=10, max_actors=4)
    assert [h.actors(ctx(k)) for k in (0, 9, 10, 19, 20, 30, 99)] == [1, 1, 2, 2, 4, 4, 4]
    assert hydrozoa(start=3, every=2, max_actors=64).actors(ctx(5)) == 12  # 3 * 2^2
    assert hydrozoa().actors(ctx(25)) == 4  # defaults: start 1, every 10, max 64


def test_a_long_growing_schedule_stays_at_its_cap():
    # 2.0 ** 1024 overflows a float: the cap must hold past it, not raise
    assert ActorSchedule(factor=2.0, max_actors=6).actors(ctx(5000)) == 6
    assert hydrozoa(every=1, max_actors=6).actors(ctx(5000)) == 6
    assert ActorSchedule(start=8, factor=0.5, min_actors=2).actors(ctx(5000)) == 2


# ------------------------------------------------------------------ minions
def test_minions_adapt_hand_computed():
    adapt = MinionsAdapt(max_actors=32, window=5)
    rows = [{"mean_return": r} for r in (10, 20, 30, 40, 50, 60)]
    assert adapt.actors(ctx(6, rows, target_reward=100)) == 13  # 40/100 * 32 = 12.8
    assert adapt.actors(ctx(0, [], target_reward=100)) == 1  # nothing yet
    with_gaps = [{"mean_return": 50}, {"mean_return": None}, {"mean_return": 75}]
    assert adapt.actors(ctx(3, with_gaps, target_reward=100)) == 20  # 62.5/100 * 32
    assert adapt.actors(ctx(1, [{"mean_return": 500}], target_reward=100)) == 32
    assert adapt.actors(ctx(1, [{"mean_return": -50}], target_reward=100)) == 1
    assert adapt.actors(ctx(1, [{"mean_return": 25 / 32 * 2.5}], target_reward=25)) == 3  # 2.5 up
    with pytest.raises(ValueError, match="target_reward"):
        adapt.actors(ctx(1, rows))


def test_scheduler_state_reward_and_terminal_penalty():
    assert scheduler_state(ctx(0, budget_left_usd=2.0, budget_usd=2.0)) == [0.0] * 7 + [1.0]
    rows = [{"mean_return": 40.0}, {"loss": 0.5, "mean_return": None, "policy_kl": 0.02,
                                    "learner_s": 0.3, "actor_s_mean": 1.5, "round_s": 2.0}]
    state = scheduler_state(ctx(2, rows, budget_left_usd=1.5, budget_usd=2.0,
                                target_reward=200.0))
    # R-bar: the latest known mean return (40) over |J|; b_k = 1.5 / 2
    assert state == [2.0, 0.5, 0.2, 0.02, 0.3, 1.5, 2.0, 0.75]
    assert scheduler_state(ctx(2, rows))[2] == 40.0  # no target: raw return
    assert round_reward({"round_s": 2.0, "cost_round": 0.01}, beta=0.1) == pytest.approx(-0.2)
    assert round_reward({"round_s": 2.0, "cost_round": 0.01}, beta=0.1, eta=10) == \
        pytest.approx(-0.3)
    assert terminal_penalty(480.0, 475.0, reached=True, budget_left=0.1) == 0.0
    assert terminal_penalty(480.0, 475.0, reached=True, budget_left=None) == 0.0
    assert terminal_penalty(300.0, 500.0, reached=True, budget_left=-0.01) == -0.4  # overdrawn
    assert terminal_penalty(300.0, 500.0, reached=False, budget_left=0.5) == -0.4
    assert terminal_penalty(520.0, 500.0, reached=False, budget_left=0.5) == 0.0  # the guard
    assert terminal_penalty(None, 500.0, reached=False, budget_left=None) == -1.0
    assert terminal_penalty(10.0, None, reached=False, budget_left=None) == 0.0


def test_numpy_scheduler_matches_the_torch_network(tmp_path):
    torch = pytest.importorskip("torch")
    from faasrl.scheduler_training.train import new_scheduler, to_numpy

    model = new_scheduler(6, seed=3)
    model.update_obs_stats(torch.randn(50, 8) * 5 + 2)
    state = [3.0, 0.4, 0.7, 0.01, 0.2, 1.1, 1.5, 0.9]
    with torch.no_grad():
        want = model.distribution(torch.tensor([state])).logits[0].numpy()
        want = want - np.log(np.exp(want).sum())
    policy = SchedulerPolicy(to_numpy(model))
    got = policy.logits(state)
    assert policy.i_max == 6
    np.testing.assert_allclose(got - np.log(np.exp(got).sum()), want, atol=1e-5)

    save_scheduler(tmp_path, "s1", to_numpy(model), {"i_max": 6})
    weights, meta = load_scheduler(tmp_path, "s1")
    assert meta == {"i_max": 6}
    greedy = Minions(weights)
    logits = policy.logits(scheduler_state(ctx(3)))
    assert greedy.actors(ctx(3)) == int(np.argmax(logits)) + 1
    assert greedy.explain()["state"] == scheduler_state(ctx(3))
    assert greedy.explain()["logprob"] == pytest.approx(
        float(logits.max() - np.log(np.exp(logits).sum())))
    sampler = Minions(weights, sample=True)
    draws = [sampler.actors(ctx(k, seed=7)) for k in range(20)]
    assert draws == [sampler.actors(ctx(k, seed=7)) for k in range(20)]  # seeded per round
    assert all(1 <= d <= 6 for d in draws) and len(set(draws)) > 1
    assert greedy.forecast(ctx(3)) == 6


def test_scheduler_store(tmp_path):
    w = {OUTPUT_BIAS: np.zeros(3, np.float32)}
    save_scheduler(tmp_path, "a-1", w, {"i_max": 3})
    assert [m["name"] for m in list_schedulers(tmp_path)] == ["a-1"]
    assert list_schedulers(tmp_path / "none") == []
    with pytest.raises(SchedulerNotFound):
        load_scheduler(tmp_path, "b")
    with pytest.raises(ValueError, match="letters"):
        load_scheduler(tmp_path, "../etc/passwd")
    delete_scheduler(tmp_path, "a-1")
    assert list_schedulers(tmp_path) == []
    with pytest.raises(SchedulerNotFound):
        delete_scheduler(tmp_path, "a-1")


# -------------------------------------------------------------------- specs
@pytest.mark.parametrize(("controller", "cls"), [
    ({"name": "nitro", "min_actors": 1, "max_actors": 4}, Nitro),
    ({"name": "kungfu", "max_actors": 4}, KungFu),
    ({"name": "hydrozoa", "every": 2}, ActorSchedule),
    ({"name": "minions-adapt"}, MinionsAdapt),
])
def test_controller_specs_build(controller, cls):
    spec = JobSpec(env_id="CartPole-v1", controller=controller)
    assert isinstance(build_controller(spec.controller), cls)


def test_minions_max_is_i_max_every_round():
    spec = JobSpec(env_id="CartPole-v1", controller={"name": "minions-max", "max_actors": 5})
    assert build_controller(spec.controller).actors(ctx(3)) == 5


@pytest.mark.parametrize(("controller", "field"), [
    ({"name": "nitro", "min_actors": 9, "max_actors": 4}, "controller.nitro"),
    ({"name": "nitro", "decay": 1.5}, "controller.nitro.decay"),
    ({"name": "nitro", "hessian_samples": 1}, "controller.nitro.hessian_samples"),
    ({"name": "minions"}, "controller.minions.scheduler"),
    ({"name": "minions", "scheduler": "../x"}, "controller.minions.scheduler"),
    ({"name": "kungfu", "gns_parts": 1}, "controller.kungfu.gns_parts"),
    ({"name": "hydrozoa", "every": 0}, "controller.hydrozoa.every"),
    ({"name": "minions-adapt", "window": 0}, "controller.minions-adapt.window"),
])
def test_bad_controller_specs_name_the_field(controller, field):
    with pytest.raises(ValidationError) as err:
        JobSpec(env_id="CartPole-v1", controller=controller)
    assert field in error_fields(err.value)


def test_budget_cap_in_a_forecast_uses_the_last_known_learner_cost():
    full = {"actors": 4, "cost_actors": 0.4, "cost_learner": 0.2}
    partial = {"actors": 2, "cost_actors": 0.2}  # the running round, before its learner
    # n0 = 2, 0.1 per actor, learner 0.2: n = 3 costs 0.3 + 0.2 * 3/2 = 0.6, n = 2 costs 0.4
    assert affordable_actors(ctx(2, [full, partial], budget_left_usd=0.55), 8) == 2
