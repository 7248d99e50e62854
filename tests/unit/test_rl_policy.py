"""The actor-critic: distributions, normalisation, the spec that rebuilds it, defaults."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from faasrl.algorithms import algorithm
from faasrl.jobs.spec import JobSpec
from faasrl.rl.envs import check_env_id, env_family
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for

GAUSSIAN = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="continuous",
                      action_dim=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0))


def test_gaussian_log_prob_and_entropy_match_the_closed_form():
    torch.manual_seed(0)
    model = ActorCritic(GAUSSIAN)
    sigma = torch.tensor([0.5, 2.0])
    with torch.no_grad():
        model.log_std.copy_(sigma.log())
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    with torch.no_grad():
        _, logprob, entropy, value = model.get_action_and_value(obs, action)
        mu = model.actor(obs)
    z = (action - mu) / sigma
    expected = (-0.5 * z**2 - sigma.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    torch.testing.assert_close(logprob, expected)
    expected_entropy = (0.5 + 0.5 * math.log(2 * math.pi) + sigma.log()).sum()
    torch.testing.assert_close(entropy, expected_entropy.expand(5))
    assert value.shape == (5,)


def test_categorical_log_prob_is_log_softmax():
    spec = PolicySpec(obs_shape=(4,), obs_dtype="float32", action_kind="discrete", action_dim=3)
    model = ActorCritic(spec)
    obs, action = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    with torch.no_grad():
        _, logprob, entropy, _ = model.get_action_and_value(obs, action)
        log_p = torch.log_softmax(model.actor(obs), -1)
    torch.testing.assert_close(logprob, log_p[torch.arange(6), action])
    torch.testing.assert_close(entropy, -(log_p.exp() * log_p).sum(-1))


def test_sampling_follows_the_generator_and_deterministic_acts_take_the_mode():
    model = ActorCritic(GAUSSIAN)
    obs = torch.randn(4, 3)
    with torch.no_grad():
        a = model.act(obs, generator=torch.Generator().manual_seed(5))
        b = model.act(obs, generator=torch.Generator().manual_seed(5))
        c = model.act(obs, generator=torch.Generator().manual_seed(6))
        torch.testing.assert_close(model.act(obs, deterministic=True), model.actor(obs))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_running_normaliser_merges_batches_exactly():
    spec = PolicySpec(obs_shape=(2,), obs_dtype="float32", action_kind="discrete",
                      action_dim=2, normalize_obs=True)
    model = ActorCritic(spec)
    rng = np.random.default_rng(0)
    parts = [rng.normal(5.0, 3.0, size=(n, 2)) for n in (7, 50, 1)]
    for part in parts:
        model.update_obs_stats(part)
    whole = np.concatenate(parts)
    np.testing.assert_allclose(model.obs_mean.numpy(), whole.mean(0), rtol=1e-10)
    np.testing.assert_allclose(model.obs_var.numpy(), whole.var(0), rtol=1e-10)
    assert model.obs_count.item() == len(whole)
    # The statistics travel with the weights, so an actor normalises exactly like the learner.
    copy = ActorCritic(spec)
    copy.load_state_dict(model.state_dict())
    x = torch.as_tensor(whole[:3], dtype=torch.float32)
    torch.testing.assert_close(copy.get_value(x), model.get_value(x))


def test_normaliser_is_a_no_op_when_off():
    model = ActorCritic(GAUSSIAN)
    model.update_obs_stats(np.ones((4, 3)))
    assert model.obs_count.item() == 0


def test_spec_round_trips_through_json_and_rejects_nonsense():
    again = PolicySpec.from_dict(json.loads(json.dumps(GAUSSIAN.to_dict())))
    assert again == GAUSSIAN and again.action_shape == (2,) and again.action_dtype == "float32"
    with pytest.raises(ValueError, match="action_kind"):
        PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="multi", action_dim=2)
    with pytest.raises(ValueError, match="obs_dtype"):
        PolicySpec(obs_shape=(3,), obs_dtype="float16", action_kind="discrete", action_dim=2)


@pytest.mark.parametrize(("env_id", "family", "expected"), [
    ("CartPole-v1", "classic", {"obs_shape": (4,), "action_kind": "discrete", "action_dim": 2,
                                "arch": "mlp", "hidden": (64, 64), "normalize_obs": False}),
    ("Pendulum-v1", "classic", {"action_kind": "continuous", "action_low": (-2.0,),
                                "action_high": (2.0,)}),
    ("Hopper-v5", "mujoco", {"obs_shape": (11,), "action_dim": 3, "hidden": (256, 256),
                             "normalize_obs": True, "obs_dtype": "float32"}),
    ("ALE/Pong-v5", "atari", {"obs_shape": (4, 84, 84), "obs_dtype": "uint8", "arch": "cnn",
                              "action_kind": "discrete", "hidden": (512,)}),
])
def test_default_policy_per_env_family(env_id, family, expected):
    """The env's spaces, and the network its family's PPO Config asks for."""
    assert env_family(env_id) == family
    cfg = JobSpec.model_validate({"env_id": env_id}).hyperparameters
    spec = algorithm("ppo").make_model(policy_spec_for(env_id), cfg).spec
    assert {k: getattr(spec, k) for k in expected} == expected
    model = ActorCritic(spec)
    obs = torch.zeros((2, *spec.obs_shape), dtype=getattr(torch, spec.obs_dtype))
    action, logprob, _, value = model.get_action_and_value(obs)
    assert action.shape == (2, *spec.action_shape) and logprob.shape == value.shape == (2,)


def test_unknown_env_ids_fail_with_a_suggestion():
    with pytest.raises(ValueError, match="did you mean 'CartPole-v1'"):
        check_env_id("CartPole-v9")
    assert env_family("NoSuchEnv-v0") == "other"
