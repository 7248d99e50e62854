"""The built-in functions check their args against their contracts at the boundary: a malformed
invocation, through a real runtime process, fails with a ContractError naming the field."""

from __future__ import annotations

import pytest

from faasrl.client import Client

JOB = {"id": "contract-test", "env_id": "CartPole-v1", "policy": None, "seed": 1,
       "envs_per_actor": 2, "steps_per_actor": 8, "hyperparameters": {"algorithm": "ppo"}}
LESS = {k: v for k, v in JOB.items() if k != "envs_per_actor"}


@pytest.fixture
def platform(make_platform):
    return make_platform(register_builtins=True)


@pytest.mark.parametrize(("function", "args", "message"), [
    ("actor", {"mode": "rollout", "job": JOB, "round": 0, "slot": -1, "version": None},
     "actor args: slot: Input should be greater than or equal to 0"),
    ("actor", {"mode": "evaluate", "job": JOB, "version": 0, "episodes": 1, "seed": 1,
               "gamma": 0.9}, "actor args: gamma: Extra inputs are not permitted"),
    ("learner", {"mode": "update", "job": LESS, "round": 0, "version": 0, "slots": [0],
                 "algorithm_state": {}, "total_rounds": None},
     "learner args: job.envs_per_actor: Field required"),
    ("learner", {"mode": "fit", "job": JOB},
     "learner args: mode: Input tag 'fit' found using 'mode' does not match"),
    ("buffer", {"mode": "sample", "job": JOB, "batches": 0, "beta": 0.4, "priorities": None,
                "inserted": 0}, "buffer args: batches: Input should be greater than or equal"),
    ("parameter", {"mode": "flush", "job": JOB, "round": 0, "session": "s",
                   "total_rounds": None, "aggregation": {"rule": "lockstep"},
                   "optimizer_step": "weighted_mean", "learners": 1, "keep": 8},
     "parameter args: aggregation: Input tag 'lockstep' found using 'rule' does not match"),
])
def test_a_malformed_invocation_names_the_field(client: Client, function, args, message):
    out = client.invoke(function, args)
    assert out["status"] == "error", out
    assert out["error"]["type"] == "ContractError"
    assert out["error"]["message"].startswith(message), out["error"]["message"]
