"""PPO (clip objective, optional adaptive KL penalty), CleanRL's ppo.py split at the data boundary.

Actors step their envs (:mod:`faasrl.rl.rollout`) and compute GAE on their own steps
(:func:`actor_batch`); the learner runs the minibatch epochs (:func:`update`, synchronous rounds)
or computes one gradient with Stellaris's truncation for the parameter function
(:func:`gradient`, asynchronous learners).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from faasrl import round_row as rr
from faasrl.algorithms.actor_critic import (  # noqa: F401 (make_*: the module surface)
    FAMILY_MODELS,
    make_model,
    make_optimizer,
)
from faasrl.rl.model_spec import ActorCriticModelSpec
from faasrl.user_input import STRICT

try:  # functions train with torch; the gateway (no torch) only validates Config
    import torch
    from torch import nn

    from faasrl.rl.truncation import truncated_ratio
except ModuleNotFoundError:
    torch = nn = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from faasrl.algorithms import LearnerContext
    from faasrl.data.trajectories import TrajectorySchema
    from faasrl.rl.policy import ActorCritic, PolicySpec
    from faasrl.rl.rollout import Steps

NAME = "ppo"
EXECUTIONS = ("sync", "async")


class PPOConfig(BaseModel):
    """PPO's hyper-parameters; the defaults are CleanRL's.

    ``target_kl`` stops the update epochs early once an epoch's mean approximate KL exceeds it.
    ``kl_coef > 0`` adds a KL penalty (PPO-penalty style) whose coefficient adapts toward
    ``kl_target`` from one update to the next (the algorithm state). ``truncation`` and ``rho``
    apply to asynchronous learners only.
    """

    model_config = STRICT

    algorithm: Literal["ppo"] = "ppo"
    learning_rate: float = Field(2.5e-4, gt=0, le=1)
    anneal_lr: bool = True
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    update_epochs: int = Field(4, ge=1, le=100)
    num_minibatches: int = Field(4, ge=1, le=4096)
    norm_adv: bool = True
    clip_coef: float = Field(0.2, gt=0, le=10)
    clip_vloss: bool = True
    ent_coef: float = Field(0.01, ge=0)
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(0.5, gt=0)
    target_kl: float | None = Field(None, gt=0)
    kl_coef: float = Field(0.0, ge=0, description="adaptive KL penalty; 0 = off")
    kl_target: float = Field(0.01, gt=0)
    truncation: Literal["paper", "artifact", "off"] = Field(
        "artifact", description="async: the cross-learner importance-ratio cap: "
                                "min(r, max(min_i r_i, ρ)) (the authors' code; the paper's "
                                "min(r, R') drifted toward random under their 10 passes), "
                                "min(r, R') (paper) or none")
    rho: float = Field(1.0, gt=0, description="async: the truncation threshold ρ")
    model: ActorCriticModelSpec = Field(default_factory=ActorCriticModelSpec,
                                        description="the actor-critic network")
    adam_eps: float = Field(1e-5, gt=0, le=1, description="Adam's ε (CleanRL's)")


Config = PPOConfig  # the name the platform looks an algorithm's hyper-parameters up by


# Per env family: vector envs per actor, steps per env per round, and hyper-parameters.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "classic": {"hyperparameters": {"learning_rate": 1e-3, "ent_coef": 0.0},
                "envs_per_actor": 4, "steps_per_actor": 128},
    "mujoco": {"hyperparameters": {"learning_rate": 3e-4, "update_epochs": 10,
                                   "num_minibatches": 32, "ent_coef": 0.0,
                                   "model": FAMILY_MODELS["mujoco"]},
               "envs_per_actor": 1, "steps_per_actor": 2048},
    "atari": {"hyperparameters": {"learning_rate": 2.5e-4, "clip_coef": 0.1,
                                  "model": FAMILY_MODELS["atari"]},
              "envs_per_actor": 8, "steps_per_actor": 128},
}
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["classic"]


def initial_state(cfg: Config) -> dict[str, Any]:
    return {"kl_coef": cfg.kl_coef}


# ------------------------------------------------------------------------------- the actor
def batch_schema(policy: PolicySpec, envs: int) -> TrajectorySchema:
    """Per step: the observation, the action, and float32 log-prob, value, advantage, return."""
    from faasrl.data.trajectories import TrajectorySchema  # its codec needs torch

    scalar = ("float32", ())
    return TrajectorySchema({"obs": (policy.obs_dtype, policy.obs_shape),
                             "actions": (policy.action_dtype, policy.action_shape),
                             "logprobs": scalar, "values": scalar, "advantages": scalar,
                             "returns": scalar})


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


def actor_batch(steps: Steps, cfg: Config) -> dict[str, np.ndarray]:
    """The batch of :func:`batch_schema` from a rollout's steps: GAE on the actor, flattened
    time-major."""
    advantages, returns = compute_gae(steps.rewards, steps.values, steps.starts,
                                      steps.next_value, steps.next_start, cfg.gamma,
                                      cfg.gae_lambda)
    batch = {"obs": steps.obs, "actions": steps.actions, "logprobs": steps.logprobs,
             "values": steps.values, "advantages": advantages, "returns": returns}
    return {k: v.reshape(-1, *v.shape[2:]) for k, v in batch.items()}


# ---------------------------------------------------------------------------- the loss
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


def _normalized(advantages: torch.Tensor, cfg: Config) -> torch.Tensor:
    if not cfg.norm_adv:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def loss(model: ActorCritic, batch: Mapping[str, torch.Tensor], cfg: Config
         ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's loss on a (mini)batch without the KL penalty, and its terms (``approx_kl`` keeps
    its gradient, so that :func:`update` can add the penalty)."""
    _, new_logprob, entropy, new_value = model.get_action_and_value(batch["obs"],
                                                                    batch["actions"])
    pg_loss, approx_kl, clipfrac = clipped_surrogate(
        new_logprob, batch["logprobs"], _normalized(batch["advantages"], cfg), cfg.clip_coef)
    v_loss = value_loss(new_value, batch["values"], batch["returns"], cfg.clip_coef,
                        cfg.clip_vloss)
    ent = entropy_bonus(entropy)
    total = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
    return total, {"pg_loss": pg_loss, "v_loss": v_loss, "entropy": ent,
                   "approx_kl": approx_kl, "clipfrac": clipfrac}


def _explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """How much of the returns' variance the value estimates explain (0 when returns are flat)."""
    var = returns.var()
    return 0.0 if var.item() == 0 else (1 - (returns - values).var() / var).item()


# ------------------------------------------------------------------------- the learner
def update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: Config,
    *,
    generator: torch.Generator,
    lr: float | None = None,
    state: Mapping[str, Any] | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Minibatch epochs of PPO on one batch (:func:`batch_schema`'s, as tensors).

    ``generator`` (a CPU generator) shuffles the minibatches, so an update is reproducible.
    ``lr``, when given, is set on every param group first. ``state`` is the last update's
    (:func:`initial_state` when None). The reported losses, entropy, approx_kl and clipfrac
    are means over the minibatches of the last epoch run; that approx_kl also drives the early
    stop (``target_kl``) and the adaptive KL coefficient. Returns the stats and the new state.
    """
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    size = batch["obs"].shape[0]
    kl_coef = float((state or initial_state(cfg))["kl_coef"])
    epochs = 0
    for _ in range(cfg.update_epochs):
        sums = dict.fromkeys((rr.LOSS, "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"),
                             0.0)
        minibatches = torch.randperm(size, generator=generator).tensor_split(cfg.num_minibatches)
        for idx in minibatches:
            idx = idx.to(batch["obs"].device)
            total, terms = loss(model, {k: v[idx] for k, v in batch.items()}, cfg)
            if kl_coef > 0:
                total = total + kl_coef * terms["approx_kl"]
            optimizer.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            for key, value in ((rr.LOSS, total), *terms.items()):
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
    }, {"kl_coef": kl_coef}


def truncated_gradient(
    model: ActorCritic,
    batch: Mapping[str, torch.Tensor],
    cfg: Config,
    *,
    peer_logprobs: Sequence[torch.Tensor] = (),
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One gradient of PPO's loss on a whole batch: an asynchronous learner's contribution.

    The learner does not step: it hands the gradient (norm-clipped at ``cfg.max_grad_norm``) to
    the parameter function, which owns the optimizer. The ratio is the learner's own π_θ/μ
    against the batch's behaviour log-probs, capped with the peers' log-probs of the same
    actions by ``cfg.truncation`` (see :mod:`faasrl.rl.truncation`), then clipped as in PPO. A
    fixed ``cfg.kl_coef`` adds the approximate KL to μ as a penalty (no adaptation: learners
    share no state). Returns the gradients by parameter name and scalar stats.
    """
    _, new_logprob, entropy, new_value = model.get_action_and_value(batch["obs"],
                                                                    batch["actions"])
    advantages = _normalized(batch["advantages"], cfg)
    behaviour = batch["logprobs"]
    logratio = new_logprob - behaviour
    ratio = truncated_ratio(logratio, [p - behaviour for p in peer_logprobs], cfg.truncation,
                            cfg.rho)
    pg_loss = surrogate_loss(ratio, advantages, cfg.clip_coef)
    v_loss = value_loss(new_value, batch["values"], batch["returns"], cfg.clip_coef,
                        cfg.clip_vloss)
    ent = entropy_bonus(entropy)
    approx_kl = ((logratio.exp() - 1) - logratio).mean()
    total = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
    if cfg.kl_coef > 0:
        total = total + cfg.kl_coef * approx_kl
    model.zero_grad(set_to_none=True)
    total.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()
             if p.grad is not None}
    own = logratio.detach().exp()
    return grads, {
        rr.LOSS: total.item(), "pg_loss": pg_loss.item(), "v_loss": v_loss.item(),
        "entropy": ent.item(), "approx_kl": approx_kl.item(),
        "clipfrac": ((ratio.detach() - 1.0).abs() > cfg.clip_coef).float().mean().item(),
        "truncated": (ratio.detach() < own).float().mean().item(),
        "grad_norm": float(grad_norm),
        "explained_variance": _explained_variance(batch["values"], batch["returns"]),
    }


def gradient(learner: LearnerContext, batches: Sequence[Mapping[str, torch.Tensor]],
             cfg: Config) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """An asynchronous learner's step: its peers' log-probs of the batches' actions (the
    truncation's cross-learner ratios), then :func:`truncated_gradient` on them all at once."""
    batch = {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    peers = learner.peers()
    peer_logprobs = []
    for weights in peers:
        learner.other.load_state_dict(weights)
        with torch.no_grad():
            peer_logprobs.append(learner.other.get_action_and_value(batch["obs"],
                                                                    batch["actions"])[1])
    grads, stats = truncated_gradient(learner.model, batch, cfg, peer_logprobs=peer_logprobs)
    return grads, {**stats, "peers": float(len(peers))}
