"""Q networks for value-based algorithms (DQN)."""

from __future__ import annotations

import math

import torch
from torch import nn

from faasrl.rl.cnn import flat_size, impala_cnn
from faasrl.rl.policy import PIXEL_SCALE, PolicySpec, activation


def _dense(n_in: int, spec: PolicySpec) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for width in spec.hidden:
        layers += [nn.Linear(n_in, width), activation(spec.activation)]
        n_in = width
    return layers


def _trunk(spec: PolicySpec) -> nn.Sequential:
    """An MLP over flat observations, or a CNN (Nature's, IMPALA's) over uint8 frames, then the
    spec's fully connected layers (torch's default init, as Ape-X's)."""
    if spec.arch == "cnn":
        convs = nn.Sequential(
            nn.Conv2d(spec.obs_shape[0], 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n_in = convs(torch.zeros(1, *spec.obs_shape)).shape[1]
        return nn.Sequential(convs, *_dense(n_in, spec))
    if spec.arch == "impala":
        convs = impala_cnn(spec.obs_shape)
        return nn.Sequential(convs, *_dense(flat_size(convs, spec.obs_shape), spec))
    return nn.Sequential(nn.Flatten(), *_dense(math.prod(spec.obs_shape), spec))


class DuelingQNetwork(nn.Module):
    """Q(s, ·) = V(s) + A(s, ·) - mean A(s, ·) on a shared trunk (Wang et al.): the value
    stream learns from every action's update, not only the one taken. Takes raw observations
    (uint8 frames are scaled here). The spec's ``hidden`` and ``activation`` shape the trunk."""

    def __init__(self, spec: PolicySpec):
        super().__init__()
        self.pixels = spec.obs_dtype == "uint8"
        self.trunk = _trunk(spec)
        self.value = nn.Linear(spec.hidden[-1], 1)
        self.advantage = nn.Linear(spec.hidden[-1], spec.action_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float() / PIXEL_SCALE if self.pixels else obs.float()
        h = self.trunk(x)
        advantage = self.advantage(h)
        return self.value(h) + advantage - advantage.mean(dim=1, keepdim=True)
