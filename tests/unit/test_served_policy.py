"""The policy function's core (faasrl.rl.serving): a model rebuilt from its own file answers
what the job's evaluation would do, and refuses malformed observations naming the field."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
import torch
from helpers import evaluation_actions, published_blob, spread

from faasrl.algorithms import algorithm
from faasrl.jobs.spec import JobSpec
from faasrl.rl.envs import make_env
from faasrl.rl.policy import ActorCritic, policy_spec_for
from faasrl.rl.serving import FrameStacks, ServedPolicy
from faasrl.runtime.invalid import InvalidArgs

CASES = [("ppo", "CartPole-v1"), ("dqn", "CartPole-v1"), ("sac", "Pendulum-v1"),
         ("ppo", "Pendulum-v1"), ("ppo", "Hopper-v5"), ("impact", "CartPole-v1")]


def model_for(name: str, env_id: str, seed: int = 0) -> torch.nn.Module:
    cfg = JobSpec.model_validate({"algorithm": name, "env_id": env_id}).hyperparameters
    torch.manual_seed(seed)
    model = algorithm(name).make_model(policy_spec_for(env_id), cfg)
    spread(model)
    if isinstance(model, ActorCritic) and model.spec.normalize_obs:  # far from (0, 1)
        model.update_obs_stats(torch.randn(500, *model.spec.obs_shape) * 3.0 + 1.5)
    return model


def observations(env_id: str, n: int = 40) -> np.ndarray:
    """Observations the env gives, with random actions."""
    env = make_env(env_id)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    seen = []
    for _ in range(n):
        seen.append(np.asarray(obs))
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(seen)


@pytest.mark.parametrize(("name", "env_id"), CASES)
def test_a_served_model_acts_as_the_jobs_evaluation(name: str, env_id: str):
    model = model_for(name, env_id)
    served = ServedPolicy(published_blob(model, name, env_id, version=7))
    obs = observations(env_id)
    expected = evaluation_actions(name, model, obs)
    one_by_one = [served.answer({"obs": o.tolist()}) for o in obs]
    assert {a["version"] for a in one_by_one} == {7}
    batch = served.answer({"obs": obs.tolist()})
    if model.spec.action_kind == "discrete":
        assert [a["actions"] for a in one_by_one] == expected.tolist() == batch["actions"]
        assert len(set(batch["actions"])) > 1  # a constant policy would prove little
    else:
        np.testing.assert_allclose([a["actions"] for a in one_by_one], expected, rtol=1e-5,
                                   atol=1e-5)  # float32 sums of another batch size
        np.testing.assert_allclose(batch["actions"], expected, atol=1e-6)
        assert len(np.unique(np.round(expected, 4), axis=0)) > 1


def test_outputs_on_request():
    ppo = ServedPolicy(published_blob(model_for("ppo", "CartPole-v1"), "ppo", "CartPole-v1"))
    obs = observations("CartPole-v1", 5)
    out = ppo.answer({"obs": obs.tolist(), "outputs": ["values", "log_probs"]})
    assert len(out["values"]) == len(out["log_probs"]) == 5
    assert all(lp <= 0 for lp in out["log_probs"])
    model = model_for("ppo", "CartPole-v1")
    with torch.no_grad():
        values = model.get_value(torch.from_numpy(obs.astype(np.float32)))
    np.testing.assert_allclose(out["values"], values.numpy(), rtol=1e-5)
    dqn = ServedPolicy(published_blob(model_for("dqn", "CartPole-v1"), "dqn", "CartPole-v1"))
    one = dqn.answer({"obs": obs[0].tolist(), "outputs": ["q_values", "values"]})
    assert len(one["q_values"]) == 2 and one["values"] == pytest.approx(max(one["q_values"]))
    assert one["actions"] == int(np.argmax(one["q_values"]))
    with pytest.raises(InvalidArgs) as refused:
        dqn.answer({"obs": obs[0].tolist(), "outputs": ["log_probs"]})
    assert refused.value.field == "outputs"
    sac = ServedPolicy(published_blob(model_for("sac", "Pendulum-v1"), "sac", "Pendulum-v1"))
    out = sac.answer({"obs": observations("Pendulum-v1", 3).tolist(),
                      "outputs": ["log_probs", "values"]})
    assert len(out["log_probs"]) == len(out["values"]) == 3


def test_sample_draws_from_the_policy():
    served = ServedPolicy(published_blob(model_for("ppo", "Pendulum-v1"), "ppo", "Pendulum-v1"))
    obs = observations("Pendulum-v1", 1)[0].tolist()
    mode = served.answer({"obs": obs})["actions"]
    torch.manual_seed(0)
    drawn = [served.answer({"obs": obs, "sample": True})["actions"] for _ in range(20)]
    assert len({tuple(a) for a in drawn}) > 1 and all(-2 <= a[0] <= 2 for a in drawn)
    assert served.answer({"obs": obs})["actions"] == mode  # deterministic by default


def _b64(a: np.ndarray, **over: Any) -> dict[str, Any]:
    return {"b64": base64.b64encode(a.tobytes()).decode(), "dtype": str(a.dtype),
            "shape": list(a.shape), **over}


FRAME = np.zeros((4, 84, 84), dtype=np.uint8)
MALFORMED: list[tuple[str, Any, str]] = [
    ("wrong shape", [0.1, 0.2, 0.3], "obs"),
    ("wrong batch shape", [[0.1, 0.2, 0.3]] * 2, "obs"),
    ("NaN", [0.1, float("nan"), 0.3, 0.4], "obs"),
    ("infinity", [[0.1, 0.2, 0.3, float("inf")]], "obs"),
    ("strings", ["a", "b", "c", "d"], "obs"),
    ("booleans", [True, False, True, False], "obs"),
    ("nulls", [None, 1, 2, 3], "obs"),
    ("not a list", "0.1 0.2 0.3 0.4", "obs"),
    ("a number", 0.5, "obs"),
    ("ragged", [[0.1, 0.2, 0.3, 0.4], [0.1]], "obs"),
    ("a bad object", {"values": [1, 2, 3, 4]}, "obs"),
    ("b64 too short", _b64(np.zeros(3, np.float32), shape=[4]), "obs"),
    ("b64 bad dtype", _b64(np.zeros(4, np.int16)), "obs"),
    ("b64 not base64", {"b64": "***", "dtype": "float32", "shape": [4]}, "obs"),
]


@pytest.mark.parametrize(("case", "obs", "field"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_observations_are_refused_naming_the_field(case: str, obs: Any, field: str):
    served = ServedPolicy(published_blob(model_for("ppo", "CartPole-v1"), "ppo", "CartPole-v1"))
    with pytest.raises(InvalidArgs) as refused:
        served.answer({"obs": obs})
    assert refused.value.field == field, refused.value
    assert str(refused.value).startswith(f"{field}: ")


@pytest.mark.parametrize(("args", "field"), [
    ([0.1, 0.2, 0.3, 0.4], "obs"), ({}, "obs"), ({"obs": [0.0] * 4, "sample": "yes"}, "sample"),
    ({"obs": [0.0] * 4, "outputs": ["everything"]}, "outputs.0"),
    ({"obs": [0.0] * 4, "temperature": 2}, "temperature"),
    ({"obs": [0.0] * 4, "session": "s", "reset": True}, "session")])
def test_malformed_requests_name_their_field(args: Any, field: str):
    served = ServedPolicy(published_blob(model_for("ppo", "CartPole-v1"), "ppo", "CartPole-v1"))
    with pytest.raises(InvalidArgs) as refused:
        served.answer(args)
    assert refused.value.field == field, refused.value


def test_frames_take_whole_numbers_in_range_and_sessions_stack_them():
    model = model_for("ppo", "ALE/Pong-v5")
    served = ServedPolicy(published_blob(model, "ppo", "ALE/Pong-v5"))
    frames = observations("ALE/Pong-v5", 6)  # each a stack of 4
    for bad in ([[[[0.5] * 84] * 84] * 4], _b64(FRAME.astype(np.float32) + 256)):
        with pytest.raises(InvalidArgs) as refused:
            served.answer({"obs": bad})
        assert refused.value.field == "obs"
    # One frame at a time with a session answers as the stacks the env made (its frame stack
    # starts an episode with the reset frame repeated).
    assert (frames[0] == frames[0][-1]).all()
    newest = [f[-1] for f in frames]
    by_session = [served.answer({"obs": _b64(newest[0]), "session": "a", "reset": True})]
    by_session += [served.answer({"obs": _b64(f), "session": "a"}) for f in newest[1:]]
    stacked = served.answer({"obs": _b64(frames)})
    assert [a["actions"] for a in by_session] == stacked["actions"] == \
        evaluation_actions("ppo", model, frames).tolist()
    with pytest.raises(InvalidArgs) as refused:
        served.answer({"obs": _b64(newest[0]), "session": "never-started"})
    assert refused.value.field == "session"
    with pytest.raises(InvalidArgs) as refused:  # a stack where one frame is due
        served.answer({"obs": _b64(frames[0]), "session": "a"})
    assert refused.value.field == "obs"


def test_a_container_keeps_a_bounded_number_of_sessions():
    stacks = FrameStacks((4, 2, 2), capacity=3)
    for i in range(5):
        stacks.push(f"s{i}", np.full((2, 2), i, np.uint8), reset=True)
    assert len(stacks) == 3
    stacks.push("s4", np.full((2, 2), 9, np.uint8), reset=False)  # kept: the newest
    with pytest.raises(InvalidArgs):
        stacks.push("s0", np.zeros((2, 2), np.uint8), reset=False)  # evicted: the oldest
