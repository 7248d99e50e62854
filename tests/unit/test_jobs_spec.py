"""Job specs, controllers and cost: defaults per env family, validation, schedules, prices."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import REPO, error_fields
from pydantic import BaseModel, ValidationError

from faasrl.algorithms import impact, ppo
from faasrl.controllers import RoundContext, build_controller
from faasrl.invoker.records import InvocationRecord
from faasrl.jobs.clock import Calibration, draw
from faasrl.jobs.cost import Pricing, actor_cost, learner_cost, serverful_cost
from faasrl.jobs.env_probe import probe_key
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord
from faasrl.user_input import load_yaml


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
    ({"env_id": "CartPole-v1", "algorithm": "rainbow"}, "algorithm"),
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
    assert field in error_fields(err.value), err.value


def test_unknown_env_id_suggests_a_close_one():
    with pytest.raises(ValidationError, match="CartPole-v1"):
        JobSpec(env_id="CartPol-v1")


CORRIDOR = {"code_sha256": "ab" * 32, "entry_point": "corridor:Corridor",
            "kwargs": {"length": 8}, "max_episode_steps": 50}


def test_an_env_as_code_is_named_by_its_entry_point_and_takes_other_defaults():
    spec = JobSpec.model_validate({"env": CORRIDOR})
    assert spec.env_id == "corridor:Corridor" and spec.family == "other"
    assert (spec.envs_per_actor, spec.hyperparameters.learning_rate) == (4, 1e-3)
    named = JobSpec.model_validate({"env": CORRIDOR, "env_id": "Corridor-8"})
    assert named.env_id == "Corridor-8" and named.env == spec.env
    # A module that registers its ids: env_id is that id, not checked against this registry.
    registers = JobSpec.model_validate({"env": {"code_sha256": "ab" * 32,
                                                "imports": ["corridor"]},
                                        "env_id": "MyCorridor-v0", "algorithm": "dqn"})
    assert registers.env_id == "MyCorridor-v0" and registers.execution == "offpolicy"
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize(("env", "field", "says"), [
    ({"code_sha256": "ab" * 32, "imports": ["corridor"]}, "env_id", "env.imports"),
    ({"code_sha256": "ab" * 32}, "env", "entry_point"),
    ({**CORRIDOR, "code_sha256": "not-a-digest"}, "env.code_sha256", "pattern"),
    ({**CORRIDOR, "entry_point": "corridor"}, "env.entry_point", "pattern"),
    ({**CORRIDOR, "max_episode_steps": 0}, "env.max_episode_steps", "greater"),
    ({**CORRIDOR, "seed": 3}, "env.seed", "Extra"),
])
def test_bad_envs_as_code_name_the_field(env, field, says):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate({"env": env})
    assert field in error_fields(err.value), err.value
    assert says in str(err.value)


def test_a_description_is_cached_per_what_the_env_is_made_of():
    """The probe's cache key: the archive, entry point, imports, kwargs, episode limit and id;
    not the job's other fields."""
    spec = JobSpec.model_validate({"env": CORRIDOR})
    same = JobSpec.model_validate({"env": CORRIDOR, "seed": 7, "algorithm": "impact"})
    assert probe_key(spec) == probe_key(same)
    for changed in ({"kwargs": {"length": 9}}, {"max_episode_steps": 51},
                    {"code_sha256": "cd" * 32}, {"imports": ["corridor"]},
                    {"entry_point": "corridor:Other"}):
        other = JobSpec.model_validate({"env": {**CORRIDOR, **changed}})
        assert probe_key(other) != probe_key(spec), changed
    named = JobSpec.model_validate({"env": CORRIDOR, "env_id": "Corridor-8"})
    assert probe_key(named) != probe_key(spec)
    assert probe_key(JobSpec(env_id="CartPole-v1")) != probe_key(JobSpec(env_id="Acrobot-v1"))


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
# Unions validated by their member's own model (the algorithm's): errors name no tag.
UNTAGGED = {"hyperparameters"}


def _float_fields(model: type[BaseModel]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(name, error location, body template) of every float field of a spec model, through
    nested models and tagged unions (whose members the tag selects; it is part of the name,
    and of the error location unless the union is UNTAGGED)."""
    for name, info in model.model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        if float in args:
            yield name, name, {name: _VALUE}
        if typing.get_origin(info.annotation) is dict:  # dict[Literal[...], Model]: one key
            if not (typing.get_origin(args[0]) is typing.Literal
                    and isinstance(args[1], type) and issubclass(args[1], BaseModel)):
                continue
            key = str(typing.get_args(args[0])[0])
            for inner, loc, body in _float_fields(args[1]):
                yield f"{name}.{key}.{inner}", f"{name}.{key}.{loc}", {name: {key: body}}
            continue
        for arg in args:
            if not (isinstance(arg, type) and issubclass(arg, BaseModel)):
                continue
            tag = {} if info.discriminator is None else \
                {info.discriminator: arg.model_fields[str(info.discriminator)].default}
            tags = list(map(str, tag.values()))
            for inner, loc, body in _float_fields(arg):
                yield (".".join([name, *tags, inner]),
                       ".".join([name, *([] if name in UNTAGGED else tags), loc]),
                       {name: {**tag, **body}})


def _fill(template: Any, value: object) -> Any:
    if isinstance(template, dict):
        return {k: _fill(v, value) for k, v in template.items()}
    return value if template is _VALUE else template


# What a body under these fields needs besides the float to be valid (merged under it).
CALIBRATED = {"a": 0.1}
CONTEXT = {"virtual": {"clock": "virtual", "execution": "async", "virtual": {
    "cores": 1, "calibration": {"actor": CALIBRATED, "learner": CALIBRATED,
                                "parameter": CALIBRATED}}}}


def _merged(base: Any, body: Any) -> Any:
    if isinstance(base, dict) and isinstance(body, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in body.items()}}
    return body


def _body(template: dict[str, Any], value: object) -> dict[str, Any]:
    body = _fill(template, value)
    return {"env_id": "CartPole-v1",
            **_merged(CONTEXT.get(next(iter(template)), {}), body)}


FLOAT_FIELDS = {name: (loc, body) for name, loc, body in _float_fields(JobSpec)}


def test_float_fields_are_found():
    assert {"stop.target_reward", "hyperparameters.ppo.learning_rate",
            "hyperparameters.impact.rho_bar", "pricing.lambda_gb_s",
            "asynchronous.aggregation.stellaris.decay", "controller.schedule.factor",
            "controller.nitro.decay", "virtual.calibration.actor.b"} <= set(FLOAT_FIELDS)


@pytest.mark.parametrize("name", sorted(FLOAT_FIELDS))
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_no_float_field_takes_nan_or_infinity(name, value):
    loc, body = FLOAT_FIELDS[name]
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate(_body(body, value))
    assert loc in error_fields(err.value), err.value
    assert JobSpec.model_validate(_body(body, 0.5))


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
    assert field in error_fields(err.value), err.value


def test_floats_take_ints():
    spec = JobSpec.model_validate({"env_id": "CartPole-v1", "stop": {"target_reward": 475},
                                   "hyperparameters": {"learning_rate": 1},
                                   "pricing": {"lambda_gb_s": 0}})
    assert spec.stop.target_reward == 475.0 and isinstance(spec.stop.target_reward, float)
    assert spec.hyperparameters.learning_rate == 1.0 and spec.pricing.lambda_gb_s == 0.0


def test_hyperparameters_are_the_algorithms_own_model():
    spec = JobSpec.model_validate({"env_id": "CartPole-v1",
                                   "hyperparameters": {"algorithm": "impact", "rho_bar": 0.5}})
    assert (spec.algorithm, spec.execution) == ("impact", "async")
    assert isinstance(spec.hyperparameters, impact.Config)
    assert spec.hyperparameters.rho_bar == 0.5 and spec.hyperparameters.clip_coef == 0.4
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
    assert isinstance(JobSpec(env_id="CartPole-v1").hyperparameters, ppo.Config)


@pytest.mark.parametrize(("body", "field"), [
    ({"algorithm": "ppo", "hyperparameters": {"algorithm": "impact"}},
     "hyperparameters.algorithm"),
    ({"hyperparameters": {"algorithm": "impact", "update_epochs": 2}},
     "hyperparameters.update_epochs"),
    ({"algorithm": "impact", "hyperparameters": {"rho_bar": 0}}, "hyperparameters.rho_bar"),
    # The layout before algorithm modules: errors name where the value was written.
    ({"execution": "async", "asynchronous": {"truncation": "sometimes"}},
     "asynchronous.truncation"),
    ({"algorithm": "impact", "asynchronous": {"impact": {"c_bar": 0}}},
     "asynchronous.impact.c_bar"),
])
def test_bad_hyperparameters_name_the_field(body, field):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate({"env_id": "CartPole-v1", **body})
    assert error_fields(err.value) == {field}, err.value


def test_the_layout_before_algorithm_modules_means_the_same():
    old = {"env_id": "CartPole-v1", "execution": "async",
           "asynchronous": {"max_learners": 2, "truncation": "off", "rho": 2.0,
                            "impact": {"rho_bar": 0.5}},
           "hyperparameters": {"learning_rate": 3e-3}}
    hp = JobSpec.model_validate(old).hyperparameters
    assert (hp.truncation, hp.rho, hp.learning_rate) == ("off", 2.0, 3e-3)
    # PPO's hyper-parameters, which IMPACT jobs took and ignored, are dropped; its own move in.
    spec = JobSpec.model_validate({**old, "algorithm": "impact",
                                   "hyperparameters": {"update_epochs": 3, "kl_coef": 0.5},
                                   "asynchronous": {"truncation": "off",
                                                    "impact": {"target_update_frequency": 3}}})
    assert spec.hyperparameters == impact.Config(kl_coef=0.5, target_update_frequency=3)


@pytest.mark.parametrize("path", sorted(p for p in (REPO / "examples").rglob("*.yaml")
                                         if p.name != "manifest.yaml"), ids=str)
def test_examples_validate(path):
    """Every example job spec (a function's manifest.yaml is no job)."""
    assert JobSpec.model_validate(load_yaml(path.read_text()))


# A record as the gateway stored it before algorithm modules (an IMPACT job's).
OLD_RECORD = {"id": "j1", "created_at": 1.0, "kl_coef": 1.0, "spec": json.loads("""{
    "name": null, "algorithm": "impact", "execution": "async", "env_id": "CartPole-v1",
    "controller": {"name": "fixed", "actors": 2},
    "asynchronous": {"max_learners": 4, "aggregation": {"rule": "stellaris", "decay": 0.96,
        "root": 3.0, "delta_max": "max"}, "optimizer_step": "weighted_mean",
        "truncation": "paper", "rho": 1.0, "backlog": null, "impact": {"rho_bar": 1.0,
        "c_bar": 1.0, "is_ratio_clip": 2.0, "target_update_frequency": 1}},
    "hyperparameters": {"learning_rate": 0.0005, "anneal_lr": true, "gamma": 0.99,
        "gae_lambda": 0.95, "update_epochs": 4, "num_minibatches": 4, "norm_adv": true,
        "clip_coef": 0.4, "clip_vloss": true, "ent_coef": 0.01, "vf_coef": 1.0,
        "max_grad_norm": 0.5, "target_kl": null, "kl_coef": 1.0, "kl_target": 0.01},
    "envs_per_actor": 4, "steps_per_actor": 128, "seed": 1,
    "stop": {"target_reward": null, "target_window": 20, "confirm_target": true,
        "max_rounds": 3, "max_env_steps": null, "budget_usd": null, "max_wall_s": null},
    "pricing": {"lambda_gb_s": 1.66667e-05, "lambda_request": 2e-07,
        "learner_vm_hour": 3.06, "learners_per_vm": 4, "serverful_vm_hour": 3.74},
    "evaluation_episodes": 20, "checkpoint_every": 10, "compress_trajectories": null,
    "placement": {"actors": null}, "actor_function": "actor", "learner_function": "learner",
    "parameter_function": "parameter"}""")}


def test_records_stored_before_algorithm_modules_load():
    rec = JobRecord.model_validate_json(json.dumps(OLD_RECORD))
    assert rec.spec.hyperparameters == impact.Config()
    old_ppo = {**OLD_RECORD, "kl_coef": 0.4,
               "spec": {**OLD_RECORD["spec"], "algorithm": "ppo", "execution": "sync"}}
    rec = JobRecord.model_validate_json(json.dumps(old_ppo))
    assert rec.algorithm_state == {"kl_coef": 0.4}
    assert rec.spec.hyperparameters == ppo.Config(learning_rate=5e-4, clip_coef=0.4,
                                                  kl_coef=1.0, vf_coef=1.0, truncation="paper")
    assert JobRecord.model_validate_json(rec.model_dump_json()) == rec


def test_the_gateway_validates_jobs_without_torch():
    """The platform image has no torch (nor lz4): the job spec, the algorithms' configs and
    the function contracts must import and validate without it."""
    code = """if True:
        import sys
        for name in ("torch", "lz4"):
            sys.modules[name] = None  # importing it now raises ModuleNotFoundError
        from faasrl.jobs import contract_args
        from faasrl.jobs.spec import JobSpec
        for body in ({"env_id": "CartPole-v1"}, {"env_id": "Hopper-v5", "algorithm": "impact"}):
            print(JobSpec.model_validate(body).hyperparameters.algorithm)
        print("torch" in sys.modules and sys.modules["torch"] is None)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ppo", "impact", "True"]


def test_a_calibrations_spread_keeps_its_mean_and_its_lower_bound():
    exact, spread = Calibration(a=0.01, b=0.001), Calibration(a=0.01, b=0.001, sd=0.4)
    draws = [draw(1, "actor", n) for n in range(4000)]
    assert draws[:50] == [draw(1, "actor", n) for n in range(50)]  # a function of its inputs
    assert draw(1, "actor", 0) != draw(2, "actor", 0) != draw(1, "learner", 0)
    assert [exact.duration(100, z) for z in draws[:10]] == [pytest.approx(0.11)] * 10
    durations = [spread.duration(100, z) for z in draws]
    assert statistics.fmean(durations) == pytest.approx(0.11, rel=0.03)
    assert min(durations) >= spread.lower_bound > 0
    assert spread.duration(0, -10) == pytest.approx(spread.lower_bound)
