"""PPO's pieces against hand-computed values, and the update's behaviour."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from faasrl.algorithms import annealed_lr
from faasrl.algorithms.ppo import (
    Config,
    clipped_surrogate,
    compute_gae,
    entropy_bonus,
    update,
    value_loss,
)
from faasrl.rl.policy import ActorCritic, PolicySpec


def test_gae_matches_a_hand_computed_example():
    # One env, three steps; the observation at t=2 starts a new episode (step 1 ended one).
    rewards = np.array([[1.0], [1.0], [1.0]], np.float32)
    values = np.array([[0.5], [0.4], [0.3]], np.float32)
    dones = np.array([[False], [False], [True]])
    adv, ret = compute_gae(rewards, values, dones, np.array([0.2], np.float32),
                           np.array([False]), gamma=0.9, gae_lambda=0.8)
    # deltas: 1 + .9*.4 - .5 = .86;  1 - .4 = .6 (no bootstrap);  1 + .9*.2 - .3 = .88
    # advantages: t2 = .88; t1 = .6 (episode ends); t0 = .86 + .9*.8*.6 = 1.292
    np.testing.assert_allclose(adv[:, 0], [1.292, 0.6, 0.88], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [1.792, 1.0, 1.18], rtol=1e-6)
    assert adv.dtype == ret.dtype == np.float32


def test_gae_with_lambda_one_is_the_discounted_return():
    rewards = np.ones((4, 1), np.float32)
    values = np.zeros((4, 1), np.float32)
    _, ret = compute_gae(rewards, values, np.zeros((4, 1), bool), np.array([0.0], np.float32),
                         np.array([True]), gamma=0.5, gae_lambda=1.0)
    np.testing.assert_allclose(ret[:, 0], [1.875, 1.75, 1.5, 1.0])


def test_clipped_surrogate_takes_the_pessimistic_term():
    old = torch.zeros(2)
    new = torch.full((2,), math.log(1.5))  # ratio 1.5 for both samples
    loss, approx_kl, clipfrac = clipped_surrogate(new, old, torch.tensor([1.0, -1.0]), 0.2)
    # +1 advantage: the gain is clipped at 1.2; -1 advantage: the full 1.5 penalty counts.
    assert loss.item() == pytest.approx((-1.2 + 1.5) / 2)
    assert approx_kl.item() == pytest.approx(0.5 - math.log(1.5))
    assert clipfrac.item() == 1.0
    same, kl, frac = clipped_surrogate(old, old, torch.tensor([2.0, -4.0]), 0.2)
    assert same.item() == pytest.approx(1.0) and kl.item() == 0 and frac.item() == 0


def test_value_loss_clipped_and_plain():
    new, old, returns = torch.tensor([2.0, 0.1]), torch.zeros(2), torch.ones(2)
    # sample 0: plain (2-1)^2 = 1, clipped (0.2-1)^2 = .64 -> 1; sample 1: .81 either way
    assert value_loss(new, old, returns, 0.2, clip=True).item() == pytest.approx(0.5 * 1.81 / 2)
    clipped_worse = torch.tensor([-0.5])  # plain 2.25, clipped (-0.2-1)^2 = 1.44 -> 2.25
    assert value_loss(clipped_worse, torch.zeros(1), torch.ones(1), 0.2, clip=True).item() \
        == pytest.approx(0.5 * 2.25)
    small_move = torch.tensor([0.3])  # plain .49; clipped to 0.2 -> .64, the worse one counts
    assert value_loss(small_move, torch.zeros(1), torch.ones(1), 0.2, clip=True).item() \
        == pytest.approx(0.5 * 0.64)
    assert value_loss(small_move, torch.zeros(1), torch.ones(1), 0.2, clip=False).item() \
        == pytest.approx(0.5 * 0.49)


def test_entropy_bonus_is_the_mean():
    assert entropy_bonus(torch.tensor([0.5, 1.5, 1.0])).item() == pytest.approx(1.0)


def test_annealed_lr():
    cfg = Config(learning_rate=1e-3)
    assert annealed_lr(cfg, 0, 10) == pytest.approx(1e-3)
    assert annealed_lr(cfg, 5, 10) == pytest.approx(5e-4)
    assert annealed_lr(cfg, 12, 10) == 0.0
    assert annealed_lr(cfg, 5, None) == pytest.approx(1e-3)
    assert annealed_lr(Config(learning_rate=1e-3, anneal_lr=False), 5, 10) == 1e-3


def test_config_rejects_bad_values_and_unknown_keys():
    with pytest.raises(ValidationError, match="update_epochs"):
        Config(update_epochs=0)
    with pytest.raises(ValidationError, match="learning_rte"):
        Config.model_validate({"learning_rte": 1e-3})


SPEC = PolicySpec(obs_shape=(3,), obs_dtype="float32", action_kind="discrete", action_dim=2)


def _bandit_batch(n: int = 64) -> dict[str, torch.Tensor]:
    """Action 0 is good (advantage +1), action 1 bad, in every state."""
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(n, 3, generator=g)
    actions = torch.arange(n) % 2
    model = ActorCritic(SPEC)
    with torch.no_grad():
        _, logprobs, _, values = model.get_action_and_value(obs, actions)
    advantages = torch.where(actions == 0, 1.0, -1.0)
    return {"obs": obs, "actions": actions, "logprobs": logprobs, "values": values,
            "advantages": advantages, "returns": values + advantages}


def _model_and_optimizer(seed: int = 0) -> tuple[ActorCritic, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = ActorCritic(SPEC)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-5)


def test_update_raises_the_probability_of_good_actions():
    model, optimizer = _model_and_optimizer()
    batch = _bandit_batch()
    with torch.no_grad():
        before = model.get_action_and_value(batch["obs"], torch.zeros(64, dtype=torch.long))[1]
    stats, _ = update(model, optimizer, batch, Config(), generator=torch.Generator())
    with torch.no_grad():
        after = model.get_action_and_value(batch["obs"], torch.zeros(64, dtype=torch.long))[1]
    assert (after > before).all()
    assert stats["epochs"] == 4 and stats["approx_kl"] > 0 and 0 <= stats["clipfrac"] <= 1


def test_update_is_deterministic_under_a_seed():
    results = []
    for _ in range(2):
        model, optimizer = _model_and_optimizer(seed=3)
        update(model, optimizer, _bandit_batch(), Config(),
                   generator=torch.Generator().manual_seed(11))
        results.append(torch.cat([p.flatten() for p in model.parameters()]))
    assert torch.equal(results[0], results[1])


def test_target_kl_stops_the_epochs_early():
    model, optimizer = _model_and_optimizer()
    stats, _ = update(model, optimizer, _bandit_batch(), Config(target_kl=1e-9),
                      generator=torch.Generator())
    assert stats["epochs"] == 1


@pytest.mark.parametrize(("kl_target", "expected"), [(1e-9, 2.0), (10.0, 0.5)])
def test_adaptive_kl_coefficient_moves_toward_the_target(kl_target, expected):
    model, optimizer = _model_and_optimizer()
    cfg = Config(kl_coef=1.0, kl_target=kl_target)
    stats, state = update(model, optimizer, _bandit_batch(), cfg, generator=torch.Generator())
    assert stats["kl_coef"] == state["kl_coef"] == expected and cfg.kl_coef == 1.0
    # The next update starts from the adapted coefficient it is given back, not cfg's.
    _, state = update(model, optimizer, _bandit_batch(), cfg, generator=torch.Generator(),
                      state=state)
    assert state["kl_coef"] == expected * expected


def test_lr_is_set_on_the_optimizer():
    model, optimizer = _model_and_optimizer()
    stats, _ = update(model, optimizer, _bandit_batch(), Config(update_epochs=1),
                      generator=torch.Generator(), lr=3e-4)
    assert stats["lr"] == optimizer.param_groups[0]["lr"] == 3e-4
