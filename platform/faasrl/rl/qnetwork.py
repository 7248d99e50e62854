"""Q networks for value-based algorithms (DQN)."""

from __future__ import annotations

import torch
from torch import nn


class DuelingQNetwork(nn.Module):
    """Q(s, ·) = V(s) + A(s, ·) - mean A(s, ·) on a shared MLP trunk (Wang et al.): the value
    stream learns from every action's update, not only the one taken."""

    def __init__(self, obs_size: int, actions: int, hidden: int = 256):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_size, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.value = nn.Linear(hidden, 1)
        self.advantage = nn.Linear(hidden, actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.trunk(obs.flatten(1).float())
        advantage = self.advantage(h)
        return self.value(h) + advantage - advantage.mean(dim=1, keepdim=True)
