"""The IMPALA CNN (Espeholt et al., 2018): three stacks of a 3x3 convolution, a 3x3 max-pool of
stride 2 and two residual blocks, with 16, 32 and 32 channels, then ReLU and flatten. Deeper
than the Nature CNN at fewer parameters; it takes images of any size (each pool halves them,
rounding up)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

IMPALA_CHANNELS = (16, 32, 32)


class Residual(nn.Module):
    """x + block(x)."""

    def __init__(self, block: nn.Sequential) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def impala_cnn(obs_shape: tuple[int, ...],
               init: Callable[[nn.Conv2d], nn.Module] = lambda conv: conv) -> nn.Sequential:
    """The convolutions over (channels, height, width) images; ``init`` initialises each conv
    (the actor-critic's orthogonal init, or torch's default)."""
    def conv(c_in: int, c_out: int) -> nn.Module:
        return init(nn.Conv2d(c_in, c_out, 3, padding=1))

    layers: list[nn.Module] = []
    channels = obs_shape[0]
    for out in IMPALA_CHANNELS:
        layers += [conv(channels, out), nn.MaxPool2d(3, stride=2, padding=1)]
        layers += [Residual(nn.Sequential(nn.ReLU(), conv(out, out), nn.ReLU(), conv(out, out)))
                   for _ in range(2)]
        channels = out
    return nn.Sequential(*layers, nn.ReLU(), nn.Flatten())


def flat_size(convs: nn.Module, obs_shape: tuple[int, ...]) -> int:
    """The width of ``convs``' flattened output for one observation."""
    with torch.no_grad():
        return convs(torch.zeros(1, *obs_shape)).shape[1]
