"""PPO (clip objective, optional adaptive KL penalty), CleanRL's ppo.py split at the data boundary.

Collection lives in :mod:`faasrl.rl.rollout`, so actors and the learner can run on different
machines; this file is the learner's side: advantage estimation, the loss terms and the update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from faasrl.rl.policy import ActorCritic
from faasrl.rl.truncation import Truncation, truncated_ratio


@dataclass
class PPOConfig:
    """PPO hyper-parameters; the defaults are CleanRL's.

    ``target_kl`` stops the update epochs early once an epoch's mean approximate KL exceeds it.
    ``kl_coef > 0`` adds a KL penalty (PPO-penalty style) whose coefficient adapts toward
    ``kl_target``; :func:`ppo_update` returns the adapted value and the caller stores it.
    """

    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    update_epochs: int = 4
    num_minibatches: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    kl_coef: float = 0.0
    kl_target: float = 0.01

    def __post_init__(self) -> None:
        if self.update_epochs < 1 or self.num_minibatches < 1:
            raise ValueError("update_epochs and num_minibatches must be at least 1")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PPOConfig:
        """Strict: an unknown key (a typo in a job's config) raises TypeError."""
        return cls(**d)


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    next_value: np.ndarray,
    next_done: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and returns (both float32, shape (T, N)).

    CleanRL's convention: ``dones[t]`` is True when the observation at step ``t`` starts a new
    episode, i.e. the step *before* ``t`` ended one; ``next_done`` says the same of the
    observation after the last step, whose value is ``next_value``. So the value after step ``t``
    is bootstrapped unless ``dones[t + 1]`` (or ``next_done`` for the last step). ``dones[0]``
    is not needed. Truncated episodes are expected to have ``gamma * V(final_obs)`` already added
    to their last reward.
    """
    next_values = np.concatenate([values[1:], next_value[None]]).astype(np.float64)
    nonterminal = 1.0 - np.concatenate([dones[1:], next_done[None]]).astype(np.float64)
    deltas = rewards + gamma * next_values * nonterminal - values
    advantages = np.zeros_like(deltas)
    last = np.zeros_like(deltas[0])
    for t in reversed(range(len(deltas))):
        last = deltas[t] + gamma * gae_lambda * nonterminal[t] * last
        advantages[t] = last
    return advantages.astype(np.float32), (advantages + values).astype(np.float32)


def surrogate_loss(ratio: torch.Tensor, advantages: torch.Tensor, clip_coef: float
                   ) -> torch.Tensor:
    """PPO's pessimistic clipped objective, negated (a loss), for any ratio."""
    return torch.max(
        -advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)
    ).mean()


def clipped_surrogate(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, approx_kl, clipfrac) of PPO's clipped objective.

    ``approx_kl`` is the low-variance estimator mean((r - 1) - log r) of KL(old || new); it keeps
    its gradient so it can serve as the KL penalty. ``clipfrac`` is the share of ratios outside
    [1 - clip_coef, 1 + clip_coef].
    """
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()
    loss = surrogate_loss(ratio, advantages, clip_coef)
    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean().detach()
    return loss, approx_kl, clipfrac


def value_loss(
    new_value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    clip_coef: float,
    clip: bool,
) -> torch.Tensor:
    """Half the squared error; with ``clip``, the worse of the plain and the clipped-update one."""
    unclipped = (new_value - returns) ** 2
    if not clip:
        return 0.5 * unclipped.mean()
    clipped = old_value + (new_value - old_value).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped - returns) ** 2).mean()


def entropy_bonus(entropy: torch.Tensor) -> torch.Tensor:
    return entropy.mean()


def annealed_lr(cfg: PPOConfig, round: int, total_rounds: int | None) -> float:
    """Learning rate for 0-based ``round``: linear to 0 over ``total_rounds`` when annealing."""
    if not cfg.anneal_lr or total_rounds is None:
        return cfg.learning_rate
    return cfg.learning_rate * max(0.0, 1.0 - round / total_rounds)


def _explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """How much of the returns' variance the value estimates explain (0 when returns are flat)."""
    var = returns.var()
    return 0.0 if var.item() == 0 else (1 - (returns - values).var() / var).item()


def ppo_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: PPOConfig,
    *,
    generator: torch.Generator,
    lr: float | None = None,
) -> dict[str, float]:
    """Minibatch epochs of PPO on one batch (as :meth:`Rollout.collect` makes it, as tensors).

    ``generator`` (a CPU generator) shuffles the minibatches, so an update is reproducible.
    ``lr``, when given, is set on every param group first. The reported losses, entropy,
    approx_kl and clipfrac are means over the minibatches of the last epoch run; that approx_kl
    also drives the early stop (``target_kl``) and the adaptive KL coefficient, which is
    returned as ``kl_coef`` (``cfg`` is left untouched).
    """
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    size = batch["obs"].shape[0]
    kl_coef = cfg.kl_coef
    epochs = 0
    for _ in range(cfg.update_epochs):
        sums = dict.fromkeys(("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"), 0.0)
        minibatches = torch.randperm(size, generator=generator).tensor_split(cfg.num_minibatches)
        for idx in minibatches:
            idx = idx.to(batch["obs"].device)
            _, new_logprob, entropy, new_value = model.get_action_and_value(
                batch["obs"][idx], batch["actions"][idx]
            )
            advantages = batch["advantages"][idx]
            if cfg.norm_adv:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            pg_loss, approx_kl, clipfrac = clipped_surrogate(
                new_logprob, batch["logprobs"][idx], advantages, cfg.clip_coef
            )
            v_loss = value_loss(new_value, batch["values"][idx], batch["returns"][idx],
                                cfg.clip_coef, cfg.clip_vloss)
            ent = entropy_bonus(entropy)
            loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
            if kl_coef > 0:
                loss = loss + kl_coef * approx_kl
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            for key, value in (("loss", loss), ("pg_loss", pg_loss), ("v_loss", v_loss),
                               ("entropy", ent), ("approx_kl", approx_kl), ("clipfrac", clipfrac)):
                sums[key] += value.item() / len(minibatches)
        epochs += 1
        if cfg.target_kl is not None and sums["approx_kl"] > cfg.target_kl:
            break
    if kl_coef > 0:
        if sums["approx_kl"] > 1.5 * cfg.kl_target:
            kl_coef *= 2.0
        elif sums["approx_kl"] < cfg.kl_target / 1.5:
            kl_coef /= 2.0
    return {
        **sums,
        "explained_variance": _explained_variance(batch["values"], batch["returns"]),
        "kl_coef": kl_coef,
        "epochs": float(epochs),
        "lr": float(optimizer.param_groups[0]["lr"]),
    }


def ppo_gradient(
    model: ActorCritic,
    batch: dict[str, torch.Tensor],
    cfg: PPOConfig,
    *,
    peer_logprobs: Sequence[torch.Tensor] = (),
    truncation: Truncation = "paper",
    rho: float = 1.0,
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One gradient of PPO's loss on a whole batch: an asynchronous learner's contribution.

    The learner does not step: it hands the gradient (norm-clipped at ``cfg.max_grad_norm``) to
    the parameter function, which owns the optimizer. The ratio is the learner's own π_θ/μ
    against the batch's behaviour log-probs, capped with the peers' log-probs of the same
    actions by ``truncation`` (see :mod:`faasrl.rl.truncation`), then clipped as in PPO. A fixed
    ``cfg.kl_coef`` adds the approximate KL to μ as a penalty (no adaptation: learners share no
    state). Returns the gradients by parameter name and scalar stats.
    """
    _, new_logprob, entropy, new_value = model.get_action_and_value(batch["obs"],
                                                                    batch["actions"])
    advantages = batch["advantages"]
    if cfg.norm_adv:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    behaviour = batch["logprobs"]
    logratio = new_logprob - behaviour
    ratio = truncated_ratio(logratio, [p - behaviour for p in peer_logprobs], truncation, rho)
    pg_loss = surrogate_loss(ratio, advantages, cfg.clip_coef)
    v_loss = value_loss(new_value, batch["values"], batch["returns"], cfg.clip_coef,
                        cfg.clip_vloss)
    ent = entropy_bonus(entropy)
    approx_kl = ((logratio.exp() - 1) - logratio).mean()
    loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
    if cfg.kl_coef > 0:
        loss = loss + cfg.kl_coef * approx_kl
    model.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()
             if p.grad is not None}
    own = logratio.detach().exp()
    return grads, {
        "loss": loss.item(), "pg_loss": pg_loss.item(), "v_loss": v_loss.item(),
        "entropy": ent.item(), "approx_kl": approx_kl.item(),
        "clipfrac": ((ratio.detach() - 1.0).abs() > cfg.clip_coef).float().mean().item(),
        "truncated": (ratio.detach() < own).float().mean().item(),
        "grad_norm": float(grad_norm),
        "explained_variance": _explained_variance(batch["values"], batch["returns"]),
    }
