"""Job specs, controllers and cost: defaults per env family, validation, schedules, prices."""

from __future__ import annotations

import math
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

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


_VALUE = object()  # where a float field's test value goes in a body template


def _float_fields(model: type[BaseModel]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(error location, body template) of every float field of a spec model, through nested
    models and tagged unions (whose members the tag selects)."""
    for name, info in model.model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        if float in args:
            yield name, {name: _VALUE}
        for arg in args:
            if not (isinstance(arg, type) and issubclass(arg, BaseModel)):
                continue
            tag = {} if info.discriminator is None else \
                {info.discriminator: arg.model_fields[str(info.discriminator)].default}
            for loc, body in _float_fields(arg):
                yield ".".join([name, *map(str, tag.values()), loc]), {name: {**tag, **body}}


def _fill(template: Any, value: object) -> Any:
    if isinstance(template, dict):
        return {k: _fill(v, value) for k, v in template.items()}
    return value if template is _VALUE else template


FLOAT_FIELDS = dict(_float_fields(JobSpec))


def test_float_fields_are_found():
    assert {"stop.target_reward", "hyperparameters.learning_rate", "pricing.lambda_gb_s",
            "asynchronous.impact.rho_bar", "asynchronous.aggregation.stellaris.decay",
            "controller.schedule.factor", "controller.nitro.decay"} <= set(FLOAT_FIELDS)


@pytest.mark.parametrize("loc", sorted(FLOAT_FIELDS))
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_no_float_field_takes_nan_or_infinity(loc, value):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate({"env_id": "CartPole-v1", **_fill(FLOAT_FIELDS[loc], value)})
    assert loc in fields(err.value), err.value
    assert JobSpec.model_validate({"env_id": "CartPole-v1", **_fill(FLOAT_FIELDS[loc], 0.5)})


@pytest.mark.parametrize(("body", "field"), [
    ({"seed": True}, "seed"),
    ({"seed": "1"}, "seed"),
    ({"envs_per_actor": 4.0}, "envs_per_actor"),
    ({"stop": {"max_rounds": False}}, "stop.max_rounds"),
    ({"stop": {"confirm_target": "yes"}}, "stop.confirm_target"),
    ({"stop": {"confirm_target": 1}}, "stop.confirm_target"),
    ({"stop": {"budget_usd": True}}, "stop.budget_usd"),
    ({"hyperparameters": {"learning_rate": "0.001"}}, "hyperparameters.learning_rate"),
    ({"pricing": {"learners_per_vm": True}}, "pricing.learners_per_vm"),
    ({"controller": {"name": "fixed", "actors": True}}, "controller.fixed.actors"),
    ({"controller": {"name": "schedule", "actors": [1, "2"]}}, "controller.schedule.actors.1"),
])
def test_numbers_and_bools_are_strict(body, field):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate({"env_id": "CartPole-v1", **body})
    assert field in fields(err.value), err.value


def test_floats_take_ints():
    spec = JobSpec.model_validate({"env_id": "CartPole-v1", "stop": {"target_reward": 475},
                                   "hyperparameters": {"learning_rate": 1},
                                   "pricing": {"lambda_gb_s": 0}})
    assert spec.stop.target_reward == 475.0 and isinstance(spec.stop.target_reward, float)
    assert spec.hyperparameters.learning_rate == 1.0 and spec.pricing.lambda_gb_s == 0.0
