"""IMPACT (Luo et al., 2020): PPO's clipped surrogate against a target network, with V-trace.

An asynchronous learner computes one gradient on a batch that a behaviour policy μ (an actor's,
possibly several versions old) sampled:

1. V-trace corrects returns and advantages from μ toward the target network π_target
   (ratios π_target/μ truncated at ρ̄ and c̄), with values and the bootstrap from the learner's
   current network;
2. the surrogate ratio is π_θ/π_target times the importance weight π_target/μ clipped to
   [0, is_ratio_clip], and PPO's clip applies to it;
3. the loss adds the value error to the V-trace targets, an entropy bonus, and a KL penalty
   KL(π_target || π_θ) that keeps the current policy near the target.

The target network is a policy ``target_lag`` published versions older than the current one
(``target_update_frequency`` in RLlib's terms), so it trails the current policy as IMPACT's
does. Batches are time-major: ``num_envs`` envs stepped ``rows / num_envs`` times, with
``rewards``, ``ends`` (1 where an episode ended with the step) and ``last_obs`` (the
observation after the last step, one row per env).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import kl_divergence

from faasrl.rl.policy import ActorCritic
from faasrl.rl.vtrace import vtrace


@dataclass
class ImpactConfig:
    """IMPACT's loss; defaults from RLlib's tuned examples as the Stellaris paper used them."""

    gamma: float = 0.99
    clip_coef: float = 0.4
    ent_coef: float = 0.01
    vf_coef: float = 1.0
    kl_coef: float = 1.0
    max_grad_norm: float = 0.5
    rho_bar: float = 1.0
    c_bar: float = 1.0
    is_ratio_clip: float = 2.0


def _kl(target: ActorCritic, model: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    """Per-sample KL(π_target || π_θ), summed over a continuous action's dimensions."""
    with torch.no_grad():
        p = target.distribution(obs)
    kl = kl_divergence(p, model.distribution(obs))
    return kl if kl.dim() == 1 else kl.sum(-1)


def impact_gradient(
    model: ActorCritic,
    target: ActorCritic,
    batch: dict[str, torch.Tensor],
    cfg: ImpactConfig,
    *,
    num_envs: int,
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One gradient of IMPACT's loss on a batch (norm-clipped); returns it by parameter name
    and scalar stats. ``target`` is only evaluated."""
    rows = batch["obs"].shape[0]
    if rows % num_envs:
        raise ValueError(f"{rows} rows are not {num_envs} envs times a number of steps")
    steps = rows // num_envs

    def seq(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(steps, num_envs)

    obs, actions, behaviour = batch["obs"], batch["actions"], batch["logprobs"]
    _, logprob, entropy, value = model.get_action_and_value(obs, actions)
    with torch.no_grad():
        _, target_logprob, _, _ = target.get_action_and_value(obs, actions)
        bootstrap = model.get_value(batch["last_obs"])
    discounts = cfg.gamma * (1.0 - batch["ends"])
    targets = vtrace(seq(behaviour), seq(target_logprob), seq(batch["rewards"]), seq(discounts),
                     seq(value.detach()), bootstrap, rho_bar=cfg.rho_bar, c_bar=cfg.c_bar)
    advantages = targets.pg_advantages.reshape(rows)
    is_ratio = (target_logprob - behaviour).exp().clamp(0.0, cfg.is_ratio_clip)
    ratio = is_ratio * (logprob - target_logprob).exp()
    pg_loss = -torch.min(advantages * ratio,
                         advantages * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
    v_loss = 0.5 * ((value - targets.vs.reshape(rows)) ** 2).mean()
    ent = entropy.mean()
    kl = _kl(target, model, obs).mean()
    loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent + cfg.kl_coef * kl
    model.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()
             if p.grad is not None}
    return grads, {
        "loss": loss.item(), "pg_loss": pg_loss.item(), "v_loss": v_loss.item(),
        "entropy": ent.item(), "kl": kl.item(),
        "clipfrac": ((ratio.detach() - 1.0).abs() > cfg.clip_coef).float().mean().item(),
        "rho_mean": targets.clipped_rhos.mean().item(), "grad_norm": float(grad_norm),
    }
