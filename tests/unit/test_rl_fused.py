"""The rollout's fused per-step forward against the reference: ActorCritic's own forward and
torch.distributions' log-probs, and its sampling against the distributions' probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal

from faasrl.rl.fused import FusedPolicy
from faasrl.rl.policy import ActorCritic, PolicySpec, policy_spec_for

DISCRETE = PolicySpec(obs_shape=(4,), obs_dtype="float32", action_kind="discrete", action_dim=3)
GAUSSIAN = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="continuous",
                      action_dim=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0),
                      normalize_obs=True)
ATARI = policy_spec_for("ALE/Pong-v5")
# Networks a job's model section asks for: other activations in the fused heads, a shared trunk.
ELU = PolicySpec(obs_shape=(4,), obs_dtype="float32", action_kind="discrete", action_dim=3,
                 hidden=(16, 8), activation="elu")
RELU_GAUSSIAN = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="continuous",
                           action_dim=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0),
                           hidden=(16,), activation="relu")
SHARED = PolicySpec(obs_shape=(4,), obs_dtype="float32", action_kind="discrete", action_dim=3,
                    hidden=(16, 8), activation="gelu", shared_trunk=True)


def _model(spec: PolicySpec, seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    model = ActorCritic(spec)
    with torch.no_grad():  # away from the initial near-uniform, zero-mean policy
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    if spec.normalize_obs:
        model.update_obs_stats(torch.randn(50, *spec.obs_shape) * 3 + 1)
    return model


def _obs(spec: PolicySpec, n: int) -> torch.Tensor:
    if spec.obs_dtype == "uint8":
        return torch.randint(0, 256, (n, *spec.obs_shape), dtype=torch.uint8)
    return torch.randn(n, *spec.obs_shape)


def _step(model: ActorCritic, obs: torch.Tensor, steps: int, seed: int = 0
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``steps`` steps on the same observations: (actions, log-probs, values, head outputs)."""
    fused = FusedPolicy(model)
    noise = fused.noise(steps, len(obs), torch.Generator().manual_seed(seed))
    outputs = fused.outputs(steps, len(obs))
    with torch.no_grad():
        actions = np.stack([fused(obs.numpy(), noise[t], outputs[t]) for t in range(steps)])
    logprobs, values = fused.log_probs_and_values(outputs, actions)
    return tuple(torch.from_numpy(x) for x in (actions, logprobs, values, outputs))


@pytest.mark.parametrize("spec", [DISCRETE, GAUSSIAN, ATARI, ELU, RELU_GAUSSIAN, SHARED],
                         ids=["mlp", "gaussian", "cnn", "elu", "relu-gaussian", "shared-gelu"])
def test_log_probs_and_values_match_the_reference_forward(spec):
    model = _model(spec)
    obs = _obs(spec, 5)
    actions, logprobs, values, _ = _step(model, obs, steps=3)
    with torch.no_grad():
        out = model.actor(model.features(obs))
        dist = Categorical(logits=out) if spec.action_kind == "discrete" else \
            Normal(out, model.log_std.exp())
        for t in range(3):
            expected = dist.log_prob(actions[t])
            if spec.action_kind == "continuous":
                expected = expected.sum(-1)
            torch.testing.assert_close(logprobs[t], expected, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(values[t], model.get_value(obs), rtol=1e-5, atol=1e-5)
            _, reference, _, _ = model.get_action_and_value(obs, actions[t])
            torch.testing.assert_close(logprobs[t], reference, rtol=1e-5, atol=1e-5)
    assert actions.shape == (3, 5, *spec.action_shape)
    assert actions.dtype == (torch.int64 if spec.action_kind == "discrete" else torch.float32)


def test_categorical_samples_follow_the_policys_probabilities():
    model = _model(DISCRETE, seed=3)
    obs = _obs(DISCRETE, 2)
    actions, _, _, _ = _step(model, obs, steps=20_000, seed=1)
    with torch.no_grad():
        probs = torch.softmax(model.actor(obs), -1)
    assert probs.min() > 0.05  # every action is drawn often enough to count
    for env in range(2):
        freq = torch.bincount(actions[:, env], minlength=3).double() / len(actions)
        # 20,000 draws: the standard error of a frequency is below 0.0036
        torch.testing.assert_close(freq, probs[env].double(), atol=0.015, rtol=0)


def test_gaussian_samples_have_the_policys_mean_and_spread():
    model = _model(GAUSSIAN, seed=4)
    obs = _obs(GAUSSIAN, 1)
    actions, _, _, _ = _step(model, obs, steps=20_000, seed=2)
    with torch.no_grad():
        mean = model.actor(model.features(obs))[0]
    torch.testing.assert_close(actions[:, 0].mean(0), mean, atol=0.05, rtol=0)
    torch.testing.assert_close(actions[:, 0].std(0), model.log_std.exp().detach(), atol=0.05,
                               rtol=0.02)


def test_sampling_follows_the_generator_and_new_weights_need_a_new_snapshot():
    model = _model(DISCRETE)
    obs = _obs(DISCRETE, 4)
    a, _, _, _ = _step(model, obs, steps=50, seed=5)
    b, _, _, _ = _step(model, obs, steps=50, seed=5)
    c, _, _, _ = _step(model, obs, steps=50, seed=6)
    assert torch.equal(a, b) and not torch.equal(a, c)
    before = FusedPolicy(model)
    model.load_state_dict(_model(DISCRETE, seed=9).state_dict())
    after = FusedPolicy(model)
    out_before, out_after = before.outputs(1, 4), after.outputs(1, 4)
    noise = before.noise(1, 4, torch.Generator().manual_seed(0))
    with torch.no_grad():
        before(obs.numpy(), noise[0], out_before[0])
        after(obs.numpy(), noise[0], out_after[0])
        torch.testing.assert_close(torch.from_numpy(out_after[0, :, -1]), model.get_value(obs),
                                   rtol=1e-5, atol=1e-5)
    assert not np.allclose(out_before, out_after)  # a snapshot keeps the weights it took
