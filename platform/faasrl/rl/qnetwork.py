"""Q networks for value-based algorithms (DQN)."""

from __future__ import annotations

import math

import torch
from torch import nn

from faasrl.rl.policy import PIXEL_SCALE, PolicySpec


def _trunk(spec: PolicySpec, hidden: int) -> nn.Sequential:
    """An MLP over flat observations, or the Nature CNN over stacked uint8 frames."""
    if spec.arch == "cnn":
        convs = nn.Sequential(
            nn.Conv2d(spec.obs_shape[0], 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n_in = convs(torch.zeros(1, *spec.obs_shape)).shape[1]
        return nn.Sequential(convs, nn.Linear(n_in, hidden), nn.ReLU())
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(spec.obs_shape), hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU())


class DuelingQNetwork(nn.Module):
    """Q(s, ·) = V(s) + A(s, ·) - mean A(s, ·) on a shared trunk (Wang et al.): the value
    stream learns from every action's update, not only the one taken. Takes raw observations
    (uint8 frames are scaled here)."""

    def __init__(self, spec: PolicySpec, hidden: int = 256):
        super().__init__()
        self.pixels = spec.obs_dtype == "uint8"
        self.trunk = _trunk(spec, hidden)
        self.value = nn.Linear(hidden, 1)
        self.advantage = nn.Linear(hidden, spec.action_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float() / PIXEL_SCALE if self.pixels else obs.float()
        h = self.trunk(x)
        advantage = self.advantage(h)
        return self.value(h) + advantage - advantage.mean(dim=1, keepdim=True)
