"""What actor-scaling controllers learn from an update: the KL between consecutive policies
(MinionsRL's state) and the gradient noise scale (KungFu's scaling signal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.distributions import Categorical, Distribution, Normal, kl_divergence

from faasrl.rl.policy import ActorCritic

CHUNK = 4096  # rows per forward pass, so a large Atari batch does not hold every activation


@torch.no_grad()
def action_distributions(model: ActorCritic, obs: torch.Tensor) -> list[Distribution]:
    """The policy's action distributions at ``obs``, in chunks; keep them to compare later."""
    return [model.distribution(chunk) for chunk in obs.split(CHUNK)]


@torch.no_grad()
def mean_policy_kl(new: list[Distribution], old: list[Distribution]) -> float:
    """mean_s KL(π_new(·|s) ‖ π_old(·|s)), MinionsRL's D^KL_k, in closed form.

    Categorical: Σ_a π_new log(π_new/π_old). Gaussian: the closed form per action dimension,
    summed over dimensions (they are independent).
    """
    total, count = 0.0, 0
    for n, o in zip(new, old, strict=True):
        kl = kl_divergence(n, o)
        if isinstance(n, Normal):
            kl = kl.sum(-1)
        elif not isinstance(n, Categorical):
            raise TypeError(f"no closed-form KL for {type(n).__name__}")
        total += kl.sum().item()
        count += kl.numel()
    return total / max(count, 1)


def gradient_noise_scale(model: ActorCritic, batch: dict[str, torch.Tensor],
                         loss: Callable[[Mapping[str, torch.Tensor]], torch.Tensor], *,
                         parts: int, generator: torch.Generator) -> dict[str, Any]:
    """The simple gradient noise scale B_simple = tr(Σ)/|G|² of ``loss`` (the algorithm's, of
    a minibatch) at ``model``'s current parameters (McCandlish et al. 2018, appendix A), what
    KungFu scales workers by.

    The batch is split into ``parts`` random minibatches of size b; their gradients g_i give
    |G_b|² = mean |g_i|² and, with B = parts·b, |G_B|² = |mean g_i|². Then the unbiased
    estimates |G|² = (B|G_B|² - b|G_b|²)/(B - b) and tr(Σ) = (|G_b|² - |G_B|²)/(1/b - 1/B).
    ``gns`` is None when the |G|² estimate is not positive (noise swamps the signal).
    """
    size = batch["obs"].shape[0]
    if parts < 2 or size < parts:
        raise ValueError(f"need at least 2 parts and a row per part (parts {parts}, rows {size})")
    b = size // parts
    idx = torch.randperm(size, generator=generator)[:b * parts].to(batch["obs"].device)
    params = [p for p in model.parameters() if p.requires_grad]
    flat: list[torch.Tensor] = []
    for part in idx.split(b):
        grads = torch.autograd.grad(loss({k: v[part] for k, v in batch.items()}), params,
                                    allow_unused=True)
        flat.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                               for g, p in zip(grads, params, strict=True)]).double())
    g = torch.stack(flat)
    small_sq = (g * g).sum(1).mean().item()
    big_sq = (g.mean(0) ** 2).sum().item()
    big = b * parts
    grad_sq = (big * big_sq - b * small_sq) / (big - b)
    trace = (small_sq - big_sq) / (1 / b - 1 / big)
    return {"gns": trace / grad_sq if grad_sq > 0 else None, "grad_sq": grad_sq,
            "trace": trace, "batch_small": b, "batch_big": big}
