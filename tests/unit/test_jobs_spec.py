"""Job specs, controllers and cost: defaults per env family, validation, schedules, prices."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faasrl.controllers import RoundContext, build_controller
from faasrl.invoker.records import InvocationRecord
from faasrl.jobs.cost import Pricing, actor_cost, learner_cost, serverful_cost
from faasrl.jobs.spec import JobSpec


def fields(exc: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def test_family_defaults_fill_what_the_spec_leaves_out():
    cartpole = JobSpec(env_id="CartPole-v1")
    assert (cartpole.envs_per_actor, cartpole.steps_per_actor) == (4, 128)
    assert cartpole.controller.name == "fixed" and cartpole.controller.actors == 2
    hopper = JobSpec(env_id="Hopper-v5", hyperparameters={"ent_coef": 0.001})
    assert (hopper.envs_per_actor, hopper.steps_per_actor) == (1, 2048)
    assert hopper.hyperparameters.update_epochs == 10  # family default kept...
    assert hopper.hyperparameters.ent_coef == 0.001  # ...next to the override
    pong = JobSpec(env_id="ALE/Pong-v5")
    assert pong.compress and not cartpole.compress
    assert pong.hyperparameters.clip_coef == 0.1


@pytest.mark.parametrize(("body", "field"), [
    ({"env_id": "CartPol-v1"}, "env_id"),
    ({"env_id": "CartPole-v1", "algorithm": "dqn"}, "algorithm"),
    ({"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 0}},
     "controller.fixed.actors"),
    ({"env_id": "CartPole-v1", "controller": {"name": "magic"}}, "controller"),
    ({"env_id": "CartPole-v1", "hyperparameters": {"learning_rate": -1}},
     "hyperparameters.learning_rate"),
    ({"env_id": "CartPole-v1", "hyperparameters": {"lr": 0.1}}, "hyperparameters.lr"),
    ({"env_id": "CartPole-v1", "stop": {"max_rounds": None}}, "stop"),
    ({"env_id": "CartPole-v1", "envs_per_actor": 0}, "envs_per_actor"),
    ({"env_id": "CartPole-v1", "colour": "red"}, "colour"),
])
def test_bad_specs_name_the_field(body, field):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate(body)
    assert field in fields(err.value), err.value


def test_unknown_env_id_suggests_a_close_one():
    with pytest.raises(ValidationError, match="CartPole-v1"):
        JobSpec(env_id="CartPol-v1")


def test_fixed_and_list_schedule():
    assert [build_controller(JobSpec(env_id="CartPole-v1").controller)
            .actors(RoundContext(k)) for k in range(3)] == [2, 2, 2]
    spec = JobSpec(env_id="CartPole-v1", controller={"name": "schedule", "actors": [1, 4, 2]})
    ctrl = build_controller(spec.controller)
    assert [ctrl.actors(RoundContext(k)) for k in range(5)] == [1, 4, 2, 2, 2]


@pytest.mark.parametrize(("rule", "expected"), [
    ({"start": 1, "factor": 2, "every": 2, "max_actors": 8}, [1, 1, 2, 2, 4, 4, 8, 8, 8]),
    ({"start": 2, "step": 1, "every": 3}, [2, 2, 2, 3, 3, 3, 4, 4, 4]),
    ({"start": 5, "step": -2, "every": 1, "min_actors": 1}, [5, 3, 1, 1, 1, 1, 1, 1, 1]),
])
def test_schedule_rules(rule, expected):
    spec = JobSpec(env_id="CartPole-v1", controller={"name": "schedule", **rule})
    ctrl = build_controller(spec.controller)
    assert [ctrl.actors(RoundContext(k)) for k in range(9)] == expected


def test_cost_from_billed_durations():
    pricing = Pricing()
    actor = InvocationRecord("a", "actor", billed_ms=2000, memory_mb=1024)
    assert actor_cost([actor, actor], pricing) == pytest.approx(
        2 * (2 * 0.0000166667 + 0.2e-6))
    learner = InvocationRecord("l", "learner", billed_ms=3600_000, memory_mb=4096)
    assert learner_cost([learner], pricing) == pytest.approx(3.06 / 4)
    assert serverful_cost(3600, pricing) == pytest.approx(3.74)
    cheap = Pricing(lambda_gb_s=0, lambda_request=1.0)
    assert actor_cost([actor], cheap) == 1.0
