"""DQN as the long-haul paper and Ape-X run it: dueling network, double-DQN n-step targets, Huber
loss on prioritized batches, ε-greedy actors with one ε each that compute their transitions'
initial priorities at the edge.

The network is :class:`faasrl.rl.qnetwork.DuelingQNetwork`. Actors build the n-step
transitions themselves (:func:`n_step`): they hold the episode's consecutive steps anyway, and
shipping (s_t, a_t, R_t^(n), s_{t+n}) lets the buffer store and
sample whole transitions without re-assembling sequences across actors, and lets the actor
compute the transition's TD error (its priority) with its copies of the online and target nets.

Not yet in the registry (``faasrl.algorithms.ALGORITHMS``): it joins once the off-policy workflow
and the buffer function that serve it exist (issue 17).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from faasrl.inputs import STRICT

try:  # functions train with torch; the gateway (no torch) only validates Config
    import torch
    from torch import nn
    from torch.nn import functional
except ModuleNotFoundError:
    torch = nn = functional = None  # type: ignore[assignment]

NAME = "dqn"


class Config(BaseModel):
    """DQN's hyper-parameters (Ape-X's and the long-haul paper's where they give them)."""

    model_config = STRICT

    algorithm: Literal["dqn"] = "dqn"
    learning_rate: float = Field(1e-4, gt=0, le=1)
    anneal_lr: bool = False
    gamma: float = Field(0.99, gt=0, le=1)
    n_step: int = Field(3, ge=1, le=100, description="steps summed into one transition")
    batch_size: int = Field(512, ge=1, le=65_536)
    memory_size: int = Field(65_536, ge=1, description="transitions the buffer holds")
    learning_starts: int = Field(1_000, ge=1, description="transitions before learning")
    target_update: int = Field(2_500, ge=1, description="learner steps between target syncs")
    publish_every: int = Field(16, ge=1, description="learner batches between weight "
                                                     "publishes (N_update)")
    max_grad_norm: float = Field(40.0, gt=0)
    alpha: float = Field(0.6, ge=0, description="prioritization; 0 = uniform replay")
    beta: float = Field(0.4, ge=0, le=1, description="initial IS exponent, annealed to 1")
    priority_epsilon: float = Field(1e-6, gt=0, description="priority floor")
    epsilon: float = Field(0.4, gt=0, le=1, description="Ape-X's base ε")
    epsilon_alpha: float = Field(7.0, ge=0, description="Ape-X's ε spread across actors")


FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "classic": {"hyperparameters": {"learning_rate": 1e-3, "batch_size": 64,
                                    "target_update": 250},
                "envs_per_actor": 1, "steps_per_actor": 64},
    "atari": {"hyperparameters": {}, "envs_per_actor": 1, "steps_per_actor": 256},
}
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["classic"]


def actor_epsilon(i: int, actors: int, cfg: Config) -> float:
    """Ape-X: actor i of N explores with ε^(1 + α·i/(N-1))."""
    spread = i / (actors - 1) if actors > 1 else 0.0
    return cfg.epsilon ** (1 + cfg.epsilon_alpha * spread)


def n_step(rewards: np.ndarray, ends: np.ndarray, gamma: float, n: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step transitions of one env's consecutive steps t = 0..T-1: (the discounted reward sum
    R_t = Σ_{k<m} γ^k r_{t+k}, the bootstrap step t + m, the bootstrap discount γ^m, or 0 where
    the episode ended within the m ≤ n steps). ``ends[t]``: the episode ended with step t. Only
    steps whose n steps (or episode end) lie within the T given are complete: the rest wait for
    the next rollout, so the arrays have one entry per complete step."""
    steps = len(rewards)
    returns, nexts, discounts = [], [], []
    for t in range(steps):
        total, m, ended = 0.0, 0, False
        while m < n and t + m < steps:
            total += gamma ** m * float(rewards[t + m])
            m += 1
            if ends[t + m - 1]:
                ended = True
                break
        if not ended and m < n:  # runs past the rollout: not complete yet
            break
        returns.append(total)
        nexts.append(t + m)
        discounts.append(0.0 if ended else gamma ** m)
    return (np.array(returns, dtype=np.float32), np.array(nexts, dtype=np.int64),
            np.array(discounts, dtype=np.float32))


def double_dqn_targets(online: nn.Module, target: nn.Module, next_obs: torch.Tensor,
                       returns: torch.Tensor, discounts: torch.Tensor) -> torch.Tensor:
    """y = R + γ^m · Q_target(s_{t+m}, argmax_a Q_online(s_{t+m}, a)); a discount of 0 (the
    episode ended) leaves R alone."""
    with torch.no_grad():
        best = online(next_obs).argmax(dim=1, keepdim=True)
        bootstrap = target(next_obs).gather(1, best).squeeze(1)
    return returns + discounts * bootstrap


def td_loss(online: nn.Module, obs: torch.Tensor, actions: torch.Tensor,
            targets: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the IS-weighted mean Huber loss, |δ| per transition: the new priorities)."""
    q = online(obs).gather(1, actions.long().unsqueeze(1)).squeeze(1)
    errors = targets - q
    loss = (weights * functional.huber_loss(q, targets, reduction="none")).mean()
    return loss, errors.detach().abs()
