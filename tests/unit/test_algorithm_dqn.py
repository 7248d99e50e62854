"""DQN's pieces against hand-computed examples: Ape-X's per-actor ε, n-step transitions,
double-DQN targets, the prioritized Huber loss and the dueling head."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from faasrl.algorithms.dqn import Config, actor_epsilon, double_dqn_targets, n_step, td_loss
from faasrl.rl.qnetwork import DuelingQNetwork


def test_ape_x_epsilons_spread_from_epsilon_to_epsilon_to_the_eighth():
    cfg = Config()
    eps = [actor_epsilon(i, 8, cfg) for i in range(8)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)
    assert eps == sorted(eps, reverse=True)
    assert actor_epsilon(0, 1, cfg) == pytest.approx(0.4)


def test_n_step_transitions_stop_at_episode_ends_and_wait_for_missing_steps():
    rewards = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ends = np.array([0, 0, 1, 0, 0], dtype=bool)  # the episode ends with step 2
    returns, nexts, discounts = n_step(rewards, ends, gamma=0.5, n=2)
    assert returns.tolist() == [1 + 0.5 * 2, 2 + 0.5 * 3, 3, 4 + 0.5 * 5]
    assert nexts.tolist() == [2, 3, 3, 5]  # step 4's transition needs step 5: next rollout
    assert discounts.tolist() == [0.25, 0.0, 0.0, 0.25]


class _Table(nn.Module):
    """Q-values read from a table by a one-hot state."""

    def __init__(self, table: list[list[float]]):
        super().__init__()
        self.table = torch.tensor(table)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.float() @ self.table


def test_double_dqn_bootstraps_the_target_net_at_the_online_nets_choice():
    online = _Table([[1.0, 5.0], [3.0, 2.0]])  # picks action 1 in state 0, action 0 in state 1
    target = _Table([[10.0, 20.0], [30.0, 40.0]])
    next_obs = torch.eye(2)
    y = double_dqn_targets(online, target, next_obs, returns=torch.tensor([1.0, 2.0]),
                           discounts=torch.tensor([0.5, 0.0]))
    assert y.tolist() == [1 + 0.5 * 20, 2.0]  # an ended episode (discount 0) takes R alone
    y = double_dqn_targets(online, target, next_obs, returns=torch.tensor([0.0, 0.0]),
                           discounts=torch.tensor([1.0, 1.0]))
    assert y.tolist() == [20.0, 30.0]  # vanilla DQN's max over the target net: 20 and 40


def test_td_loss_weights_each_huber_term_and_returns_the_new_priorities():
    online = _Table([[0.0, 0.0], [0.0, 0.0]])
    obs, actions = torch.eye(2), torch.tensor([0, 1])
    loss, priorities = td_loss(online, obs, actions, targets=torch.tensor([0.5, 3.0]),
                               weights=torch.tensor([1.0, 0.5]))
    assert loss.item() == pytest.approx((0.5 * 0.5 ** 2 + 0.5 * (3.0 - 0.5)) / 2)
    assert priorities.tolist() == [0.5, 3.0]


def test_the_dueling_head_averages_to_the_state_value():
    torch.manual_seed(0)
    net = DuelingQNetwork(obs_size=4, actions=3, hidden=16)
    obs = torch.randn(5, 4)
    q = net(obs)
    value = net.value(net.trunk(obs)).squeeze(1)
    assert q.shape == (5, 3) and torch.allclose(q.mean(dim=1), value, atol=1e-6)
