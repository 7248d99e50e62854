"""Stellaris's importance-sampling truncation for asynchronous PPO learners.

With n learners holding different policies θ_1..θ_n and a batch sampled by μ, Stellaris caps
the ratio a learner trains with by the lowest learner-actor ratio it observes:

    R' = min(min_i π_θi(a|s) / μ(a|s), ρ)

It enters as a cap on the learner's own, differentiable ratio, the cross-learner ratios detached
(they are other learners' policies, not parameters of this gradient); PPO's clip then applies
to the result. Three forms:

- ``paper``: r = min(r_own, R')                        (Eq. 2 of the paper)
- ``artifact``: r = min(r_own, max(min_i r_i, ρ))      (the authors' published code)
- ``off``: r = r_own                                   (plain PPO, for the ablation)

The minimum over learners includes the learner's own ratio (detached); where the cap binds the
sample contributes no policy gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

Truncation = Literal["paper", "artifact", "off"]
TRUNCATIONS: tuple[str, ...] = ("paper", "artifact", "off")


def truncated_ratio(
    own_logratio: torch.Tensor,
    peer_logratios: Sequence[torch.Tensor],
    mode: Truncation,
    rho: float,
) -> torch.Tensor:
    """The ratio a learner trains with: its own π_θ/μ (from log π_θ - log μ, differentiable),
    capped as ``mode`` says by the peers' log-ratios (detached) and ``rho``."""
    ratio = own_logratio.exp()
    if mode == "off":
        return ratio
    if mode not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, not {mode!r}")
    ratios = torch.stack([ratio.detach(), *(p.detach().exp() for p in peer_logratios)])
    lowest = ratios.min(0).values
    cap = lowest.clamp(max=rho) if mode == "paper" else lowest.clamp(min=rho)
    return torch.where(ratio <= cap, ratio, cap)
