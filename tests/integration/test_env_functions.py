"""Envs brought as code, through the real actor function (a runtime process of the embedded
platform): the describe probe answers what an env is or where it failed, bounded in time, and
a job's rollout builds its env from the archive in the job's Redis."""

from __future__ import annotations

import base64
import json

import torch
from helpers import CORRIDOR_DIR

from faasrl.client import Client
from faasrl.code_archive import digest, pack
from faasrl.data.keys import env_code_key
from faasrl.data.params import ParameterStore
from faasrl.rl.policy import ActorCritic, PolicySpec

PLATFORM = {"register_builtins": True}
ARCHIVE = pack(CORRIDOR_DIR)
SHA = digest(ARCHIVE)
CODE = base64.b64encode(ARCHIVE).decode()

# The policies published below are 8 wide: the job's Config names that network (actors build
# the model its model section says).
PPO_8 = {"algorithm": "ppo", "model": {"hidden": [8]}}

def describe(client: Client, entry_point: str, timeout_s: float = 20.0, **env) -> dict:
    out = client.invoke("actor", {
        "mode": "describe", "env_id": "custom", "code": CODE, "timeout_s": timeout_s,
        "env": {"code_sha256": SHA, "entry_point": entry_point, **env}})
    assert out["status"] == "success", out
    return out["result"]


def test_describe_answers_the_spaces_of_good_envs(client):
    """One brought as code, one registered (with what gymnasium's checker warns of)."""
    result = describe(client, "corridor:Corridor", kwargs={"length": 5}, max_episode_steps=20)
    assert result["error"] is None and result["stage"] is None
    d = result["description"]
    assert (d["family"], d["obs_shape"], d["obs_dtype"], d["action_kind"], d["action_dim"]) == \
        ("other", [1], "float32", "discrete", 2)
    assert d["action_space"] == "Discrete(2)" and d["max_episode_steps"] == 20
    assert d["checker_warnings"] == []
    assert d["preprocessing"]["code"]["entry_point"] == "corridor:Corridor"
    cartpole = client.invoke("actor", {"mode": "describe", "env_id": "CartPole-v1"})["result"]
    d = cartpole["description"]
    assert (d["family"], d["obs_shape"], d["action_dim"], d["max_episode_steps"]) == \
        ("classic", [4], 2, 500)
    assert "A Box observation space minimum value is -infinity. This is probably too low." \
        in d["checker_warnings"]
    unknown = client.invoke("actor", {"mode": "describe", "env_id": "CartPol-v1"})["result"]
    assert unknown["stage"] == "make" and "did you mean 'CartPole-v1'" in unknown["error"]


BAD_ENVS = [  # (entry point, the stage it fails at, what the error says)
    ("broken_import:Env", "import", "ImportError: broken_import: this module cannot be imported"),
    ("misbehaving:RaisesAtReset", "reset", "RuntimeError: RaisesAtReset: no reset today"),
    ("misbehaving:RaisesMidStep", "step", "ValueError: RaisesMidStep: step 5 went wrong"),
    ("misbehaving:MultiDiscreteAction", "spaces", "action space MultiDiscrete([2 2]) is not"),
    ("misbehaving:EatsMemory", "reset", "MemoryError"),  # held to half the actor's memory
]


def test_describe_answers_where_a_bad_env_failed(client):
    """One warm container answers them all (each probe's child takes the failure)."""
    for entry_point, stage, message in BAD_ENVS:
        result = describe(client, entry_point)
        assert result["description"] is None and result["stage"] == stage, entry_point
        assert message in result["error"], result


def test_describe_stops_an_env_that_loops_and_the_function_lives_on(client):
    result = describe(client, "misbehaving:LoopsInReset", timeout_s=3)
    assert (result["stage"], result["error"]) == ("reset", "timed out after 3 s")
    again = describe(client, "corridor:Corridor")  # the same warm container answers
    assert again["description"] is not None


def test_a_rollout_builds_the_jobs_env_from_its_archive_in_redis(client, r):
    """The job context names the env's code; the actor reads the archive from the job's key
    and steps the corridor, episodes cut at max_episode_steps."""
    spec = PolicySpec((1,), "float32", "discrete", 2, hidden=(8,))
    torch.manual_seed(0)
    ParameterStore(r, "custom-env").publish(0, ActorCritic(spec).state_dict())
    r.set(env_code_key("custom-env"), ARCHIVE)
    job = {"id": "custom-env", "env_id": "custom", "policy": spec.to_dict(), "seed": 1,
           "envs_per_actor": 2, "steps_per_actor": 16, "hyperparameters": PPO_8,
           "env": {"code_sha256": SHA, "entry_point": "corridor:Corridor",
                   "kwargs": {"length": 40}, "max_episode_steps": 8}}
    out = client.invoke("actor", {"mode": "rollout", "job": job, "round": 0, "slot": 0,
                                  "version": 0})
    assert out["status"] == "success", out
    result = out["result"]
    assert result["steps"] == 32 and result["envs_started"]
    assert [length for _, length in result["episodes"]] == [8] * 4


def test_a_job_whose_env_raises_mid_step_fails_naming_the_env_and_the_step(client, r):
    spec = PolicySpec((1,), "float32", "discrete", 2, hidden=(8,))
    ParameterStore(r, "bad-env").publish(0, ActorCritic(spec).state_dict())
    r.set(env_code_key("bad-env"), ARCHIVE)
    job = {"id": "bad-env", "env_id": "custom", "policy": spec.to_dict(), "seed": 1,
           "envs_per_actor": 1, "steps_per_actor": 16, "hyperparameters": PPO_8,
           "env": {"code_sha256": SHA, "entry_point": "misbehaving:RaisesMidStep"}}
    out = client.invoke("actor", {"mode": "rollout", "job": job, "round": 0, "slot": 0,
                                  "version": 0})
    assert out["status"] == "error", out
    assert out["error"]["type"] == "EnvError"
    assert out["error"]["message"].startswith(
        "env 'misbehaving:RaisesMidStep' failed at step: "), out["error"]
    assert "RaisesMidStep: step 5 went wrong" in out["error"]["message"]


def test_the_learner_builds_the_policy_from_the_description_without_the_env(client, r):
    """No archive in Redis, an id gymnasium does not know: the learner's init still builds
    the policy (the CNN, for frames) from what the probe found, and its model card names
    the env's code and wrappers."""
    description = describe(client, "misbehaving:Frames")["description"]
    job = {"id": "described", "env_id": "custom", "policy": None, "seed": 1,
           "envs_per_actor": 1, "steps_per_actor": 8, "hyperparameters": {"algorithm": "ppo"},
           "env": {"code_sha256": SHA, "entry_point": "misbehaving:Frames"},
           "env_description": description}
    out = client.invoke("learner", {"mode": "init", "job": job})
    assert out["status"] == "success", out
    policy = out["result"]["policy"]
    assert (policy["arch"], policy["obs_shape"], policy["obs_dtype"]) == \
        ("cnn", [3, 48, 48], "uint8")
    _, meta = ParameterStore(r, "described").load(0)
    card = json.loads(meta["env"])
    assert card["code"]["entry_point"] == "misbehaving:Frames"
    assert card["wrappers"] == [{"name": "TransposeObservation", "kwargs": {"axes": [2, 0, 1]}}]
