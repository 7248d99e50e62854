"""V-trace (Espeholt et al., IMPALA): value targets and policy-gradient advantages for
trajectories that a behaviour policy μ sampled, corrected toward a target policy π.

Every tensor is time-major, shape (T, N): T steps of N envs. ``discounts[t]`` is γ, or 0 where
the episode ended with step t, so nothing is bootstrapped across episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VTraceTargets:
    vs: torch.Tensor  # value targets v_s, (T, N)
    pg_advantages: torch.Tensor  # ρ_t (r_t + γ_t v_{t+1} - V(x_t)), (T, N)
    clipped_rhos: torch.Tensor  # min(ρ̄, π/μ), (T, N)


@torch.no_grad()
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
    """V-trace with λ = 1: ``v_s = V(x_s) + Σ_t γ^{t-s} (Π_{i<t} c_i) δ_t``, computed backwards as
    ``v_s - V(x_s) = δ_s + γ_s c_s (v_{s+1} - V(x_{s+1}))`` with ``δ_t = ρ_t (r_t + γ_t V(x_{t+1})
    - V(x_t))``, ``ρ_t = min(ρ̄, π/μ)`` and ``c_t = min(c̄, π/μ)``.

    ``bootstrap_value`` (N,) is V of the observation after the last step. ρ̄ bounds the fixed
    point the values move to, c̄ the variance of the trace; the advantages use ρ̄ too.
    """
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
