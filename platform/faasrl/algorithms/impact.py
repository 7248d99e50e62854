"""IMPACT (Luo et al., 2020): PPO's clipped surrogate against a target network, with V-trace.

Asynchronous only. An actor hands over its raw steps (no advantages: the learner computes them);
a learner computes one gradient on a batch that a behaviour policy μ (an actor's, possibly
several versions old) sampled:

1. V-trace corrects returns and advantages from μ toward the target network π_target
   (ratios π_target/μ truncated at ρ̄ and c̄), with values and the bootstrap from the learner's
   current network;
2. the surrogate ratio is π_θ/π_target times the importance weight π_target/μ clipped to
   [0, is_ratio_clip], and PPO's clip applies to it;
3. the loss adds the value error to the V-trace targets, an entropy bonus, and a KL penalty
   KL(π_target || π_θ) that keeps the current policy near the target.

The target network is a policy ``target_update_frequency`` published versions older than the
current one (RLlib's name), so it trails the current policy as IMPACT's does. Batches are
time-major: ``num_envs`` envs stepped ``rows / num_envs`` times, with ``rewards``, ``ends`` (1
where an episode ended with the step) and ``last_obs`` (the observation after the last step, one
row per env).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    from torch.distributions import kl_divergence

    from faasrl.rl.aggregation import combine
except ModuleNotFoundError:
    torch = nn = kl_divergence = combine = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from faasrl.algorithms import LearnerContext
    from faasrl.data.trajectories import TrajectorySchema
    from faasrl.rl.policy import ActorCritic, PolicySpec
    from faasrl.rl.rollout import Steps

NAME = "impact"
EXECUTIONS = ("async",)


class IMPACTConfig(BaseModel):
    """IMPACT's loss and target network; defaults from RLlib's tuned examples, as the Stellaris
    paper's table gives them, for every env family."""

    model_config = STRICT

    algorithm: Literal["impact"] = "impact"
    learning_rate: float = Field(5e-4, gt=0, le=1)
    anneal_lr: bool = True
    gamma: float = Field(0.99, gt=0, le=1)
    clip_coef: float = Field(0.4, gt=0, le=10)
    ent_coef: float = Field(0.01, ge=0)
    vf_coef: float = Field(1.0, ge=0)
    kl_coef: float = Field(1.0, ge=0, description="the KL(π_target ‖ π_θ) penalty")
    max_grad_norm: float = Field(0.5, gt=0)
    rho_bar: float = Field(1.0, gt=0, description="V-trace ρ̄")
    c_bar: float = Field(1.0, gt=0, description="V-trace c̄")
    is_ratio_clip: float = Field(2.0, gt=0, description="clip of π_target/μ in the surrogate")
    target_update_frequency: int = Field(
        1, ge=1, le=64, description="the target network trails the policy by this many versions")
    model: ActorCriticModelSpec = Field(default_factory=ActorCriticModelSpec,
                                        description="the actor-critic network")
    adam_eps: float = Field(1e-5, gt=0, le=1, description="Adam's ε (the parameter function's)")


Config = IMPACTConfig  # the name the platform looks an algorithm's hyper-parameters up by


# Per env family: vector envs per actor and steps per env per round (PPO's), and PPO's
# networks; the other hyper-parameters are Config's everywhere.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "classic": {"envs_per_actor": 4, "steps_per_actor": 128},
    "mujoco": {"hyperparameters": {"model": FAMILY_MODELS["mujoco"]},
               "envs_per_actor": 1, "steps_per_actor": 2048},
    "atari": {"hyperparameters": {"model": FAMILY_MODELS["atari"]},
              "envs_per_actor": 8, "steps_per_actor": 128},
}
FAMILY_DEFAULTS["other"] = FAMILY_DEFAULTS["classic"]


def initial_state(cfg: Config) -> dict[str, Any]:
    return {}  # the target network is a published version: nothing to carry


# ------------------------------------------------------------------------------- the actor
def batch_schema(policy: PolicySpec, envs: int) -> TrajectorySchema:
    """Per step: the observation, the action, and float32 log-prob, reward and episode end;
    per env: the observation after the last step (V-trace's bootstrap)."""
    from faasrl.data.trajectories import TrajectorySchema  # its codec needs torch

    scalar = ("float32", ())
    return TrajectorySchema({"obs": (policy.obs_dtype, policy.obs_shape),
                             "actions": (policy.action_dtype, policy.action_shape),
                             "logprobs": scalar, "rewards": scalar, "ends": scalar},
                            {"last_obs": (policy.obs_dtype, policy.obs_shape)}, envs)


def actor_batch(steps: Steps, cfg: Config) -> dict[str, np.ndarray]:
    """The batch of :func:`batch_schema` from a rollout's steps, flattened time-major."""
    batch = {"obs": steps.obs, "actions": steps.actions, "logprobs": steps.logprobs,
             "rewards": steps.rewards, "ends": steps.ends.astype(np.float32)}
    return {**{k: v.reshape(-1, *v.shape[2:]) for k, v in batch.items()},
            "last_obs": steps.next_obs.copy()}


# -------------------------------------------------------------------------------- V-trace
@dataclass(frozen=True)
class VTraceTargets:
    vs: torch.Tensor  # value targets v_s, (T, N)
    pg_advantages: torch.Tensor  # ρ_t (r_t + γ_t v_{t+1} - V(x_t)), (T, N)
    clipped_rhos: torch.Tensor  # min(ρ̄, π/μ), (T, N)


def vtrace(
    behaviour_logprobs: torch.Tensor,
    target_logprobs: torch.Tensor,
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    *,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> VTraceTargets:
    """V-trace (Espeholt et al., IMPALA) with λ = 1: value targets and policy-gradient
    advantages for steps μ sampled, corrected toward π. Every tensor is time-major, (T, N);
    ``discounts[t]`` is γ, or 0 where the episode ended with step t, so nothing is bootstrapped
    across episodes.

    ``v_s = V(x_s) + Σ_t γ^{t-s} (Π_{i<t} c_i) δ_t``, computed backwards as
    ``v_s - V(x_s) = δ_s + γ_s c_s (v_{s+1} - V(x_{s+1}))`` with ``δ_t = ρ_t (r_t + γ_t V(x_{t+1})
    - V(x_t))``, ``ρ_t = min(ρ̄, π/μ)`` and ``c_t = min(c̄, π/μ)``.

    ``bootstrap_value`` (N,) is V of the observation after the last step. ρ̄ bounds the fixed
    point the values move to, c̄ the variance of the trace; the advantages use ρ̄ too.
    """
    with torch.no_grad():
        rhos = torch.exp(target_logprobs - behaviour_logprobs)
        clipped_rhos = rhos.clamp(max=rho_bar)
        cs = rhos.clamp(max=c_bar)
        next_values = torch.cat([values[1:], bootstrap_value[None]])
        deltas = clipped_rhos * (rewards + discounts * next_values - values)
        vs_minus_v = torch.empty_like(values)
        acc = torch.zeros_like(bootstrap_value)
        for t in reversed(range(values.shape[0])):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            vs_minus_v[t] = acc
        vs = vs_minus_v + values
        next_vs = torch.cat([vs[1:], bootstrap_value[None]])
        pg_advantages = clipped_rhos * (rewards + discounts * next_vs - values)
    return VTraceTargets(vs=vs, pg_advantages=pg_advantages, clipped_rhos=clipped_rhos)


# ------------------------------------------------------------------------- the learner
def _kl(target: ActorCritic, model: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    """Per-sample KL(π_target || π_θ), summed over a continuous action's dimensions."""
    with torch.no_grad():
        p = target.distribution(obs)
    kl = kl_divergence(p, model.distribution(obs))
    return kl if kl.dim() == 1 else kl.sum(-1)


def batch_gradient(
    model: ActorCritic,
    target: ActorCritic,
    batch: Mapping[str, torch.Tensor],
    cfg: Config,
    *,
    num_envs: int,
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One gradient of IMPACT's loss on one batch (norm-clipped); returns it by parameter name
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
        rr.LOSS: loss.item(), "pg_loss": pg_loss.item(), "v_loss": v_loss.item(),
        "entropy": ent.item(), "kl": kl.item(),
        "clipfrac": ((ratio.detach() - 1.0).abs() > cfg.clip_coef).float().mean().item(),
        "rho_mean": targets.clipped_rhos.mean().item(), "grad_norm": float(grad_norm),
    }


def gradient(learner: LearnerContext, batches: Sequence[Mapping[str, torch.Tensor]],
             cfg: Config) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """An asynchronous learner's step: the target network is the policy
    ``target_update_frequency`` versions back (the current one once that is evicted); V-trace
    runs along each batch's own time axis, and the batches' gradients are averaged."""
    target = learner.version(max(0, learner.clock - cfg.target_update_frequency))
    learner.other.load_state_dict(learner.model.state_dict() if target is None else target)
    grads, stats = [], {}
    for b in batches:
        g, stats = batch_gradient(learner.model, learner.other, b, cfg,
                                  num_envs=len(b["last_obs"]))
        grads.append(g)
    return combine(grads, [1.0] * len(grads)), stats
