"""The function contracts: what the driver builds from a job's record is what a handler parses,
key for key, and a malformed invocation's error names the field."""

from __future__ import annotations

import json

import pytest

from faasrl.contracts import (
    ACTOR_ARGS,
    LEARNER_ARGS,
    PARAMETER_ARGS,
    PARAMETER_RESULT,
    ContractError,
    FlushResult,
    StepResult,
    parse,
)
from faasrl.data.ops import ASYNC_KEEP_VERSIONS
from faasrl.jobs import contract_args as calls
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord

REDIS = {"username": "faasrl-job-j1", "password": "secret"}
JOB = {"id": "j1", "env_id": "CartPole-v1", "seed": 1, "envs_per_actor": 4,
       "steps_per_actor": 8, "hyperparameters": {"algorithm": "ppo"}}


def _record(**spec: object) -> JobRecord:
    return JobRecord(id="j1", created_at=0.0, version=3, policy={"obs_shape": [4]},
                     algorithm_state={"kl_coef": 0.2},
                     spec=JobSpec.model_validate({"env_id": "CartPole-v1", **spec}))


def _sent(args: object, adapter: object) -> object:
    """``args`` as the handler gets them: through JSON, parsed with its function's union."""
    return parse(adapter, json.loads(json.dumps(args.model_dump(mode="json"))), "args")


def test_what_the_driver_sends_is_what_the_handler_parses():
    rec = _record(algorithm="impact", asynchronous={"aggregation": {"rule": "softsync"}})
    for args, adapter in ((calls.rollout_args(rec, REDIS, 2, 1, None), ACTOR_ARGS),
                          (calls.evaluate_args(rec, REDIS, "final"), ACTOR_ARGS),
                          (calls.init_args(rec, REDIS), LEARNER_ARGS),
                          (calls.gradient_args(rec, REDIS, 0, ["1-0", "2-0"],
                                               [(2, 4), (0, 1)]), LEARNER_ARGS),
                          (calls.parameter_args(rec, REDIS, "flush", 2, "s"), PARAMETER_ARGS)):
        assert _sent(args, adapter) == args
    job = calls.job_context(rec, REDIS)
    # The spec's own names, and the algorithm's whole config: nothing renamed or repeated.
    assert (job.envs_per_actor, job.steps_per_actor) == (4, 128)
    assert job.hyperparameters == rec.spec.hyperparameters
    flush = calls.parameter_args(rec, REDIS, "flush", 2, "s")
    assert flush.mode == "flush" and flush.aggregation.k == 4  # softsync: k = max_learners
    assert flush.keep == ASYNC_KEEP_VERSIONS + 1  # IMPACT's target trails by one version


def test_an_update_carries_the_algorithm_state_and_the_controllers_requests():
    rec = _record(stop={"max_rounds": 7})
    args = calls.update_args(rec, REDIS, 2, [0, 1], {"gns": {"parts": 4}})
    assert _sent(args, LEARNER_ARGS) == args
    assert (args.version, args.algorithm_state, args.total_rounds) == (3, {"kl_coef": 0.2}, 7)
    assert args.gns is not None and args.gns.parts == 4 and args.hessian is None


@pytest.mark.parametrize(("args", "message"), [
    ({"job": {}}, "learner args: mode: Unable to extract tag"),
    ({"mode": "init", "job": {"id": "j1"}}, "learner args: job.env_id: Field required"),
    ({"mode": "gradient", "job": {}, "slot": "one", "entries": []},
     "learner args: job.id: Field required"),
    ({"mode": "gradient", "job": JOB, "slot": 0, "entries": ["1-0"], "envs": [(3, 5)]},
     "learner args: envs: Value error, columns must be non-empty and within the batch's 4"),
    ({"mode": "gradient", "job": JOB, "slot": 0, "entries": ["1-0"], "envs": [(0, 1)] * 2},
     "learner args: envs: Value error, one [start, stop) per entry"),
])
def test_a_malformed_invocation_names_the_field(args, message):
    with pytest.raises(ContractError) as err:
        parse(LEARNER_ARGS, args, "learner args")
    assert str(err.value).startswith(message), err.value


STEP = {"mode": "step", "job": JOB, "round": 0, "session": "s", "total_rounds": None,
        "aggregation": {"rule": "async"}, "optimizer_step": "weighted_mean", "learners": 2,
        "keep": 4}
GRADIENT = {"mode": "gradient", "job": JOB, "slot": 0, "entries": ["1-0"]}


def test_pinned_reads_travel_as_json_and_default_to_none():
    pinned = parse(LEARNER_ARGS, json.loads(json.dumps({**GRADIENT, "version": 3,
                                                        "peers": {"1": 2}})), "args")
    assert (pinned.version, pinned.peers) == (3, {1: 2})  # JSON's keys are strings
    plain = parse(LEARNER_ARGS, GRADIENT, "args")
    assert (plain.version, plain.peers) == (None, None)
    step = parse(PARAMETER_ARGS, {**STEP, "gradients": ["5-0", "4-1"], "in_flight": [2]}, "a")
    assert (step.gradients, step.in_flight) == (["5-0", "4-1"], [2])
    assert parse(PARAMETER_ARGS, STEP, "args").gradients is None


@pytest.mark.parametrize(("adapter", "args", "message"), [
    (LEARNER_ARGS, {**GRADIENT, "version": -1}, "version: Input should be greater than or"),
    (LEARNER_ARGS, {**GRADIENT, "peers": {"1": -2}}, "peers.1: Input should be greater"),
    (PARAMETER_ARGS, {**STEP, "gradients": ["1-0", "x"]}, "gradients.1: String should match"),
    (PARAMETER_ARGS, {**STEP, "in_flight": [-1]}, "in_flight.0: Input should be greater"),
])
def test_a_malformed_pin_names_the_field(adapter, args, message):
    with pytest.raises(ContractError) as err:
        parse(adapter, args, "args")
    assert str(err.value).startswith(f"args: {message}"), err.value


def test_step_and_flush_results_are_told_apart():
    step = {"clock": 3, "aggregations": 1, "queued": 0, "run_s": 0.1}
    assert type(parse(PARAMETER_RESULT, step, "parameter result")) is StepResult
    flush = {**step, "round_aggregations": 2, "gradients_aggregated": 4, "gradients_dropped": 0,
             "reasons": {"threshold": 2}, "staleness_mean": 0.5, "staleness_max": 1,
             "threshold": None, "next_threshold": 1.9, "state": {"rule": {}}}
    assert isinstance(parse(PARAMETER_RESULT, flush, "parameter result"), FlushResult)
