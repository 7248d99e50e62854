"""Nitro: boost the actor count in rounds whose surrogate objective is flat (low Hessian ratio).

After each update the learner measures λ_min and λ_max of the Hessian of the surrogate objective
L(θ) = E[log π_θ(a|s)·A] on a subset of the round's samples (``faasrl.rl.hessian``). Then, with
k the number of updates so far (it starts at 1) and W the last n valid values of R:

    R_k = -λ_max / λ_min
    S_k = (R_max - R_k) / (R_max - R_min) · d^k          R_min, R_max over W (R_k included)
    I_k = clip(floor(I_max · S_k), I_min, I_max)

Guards (the paper leaves these cases open; each is tested):
  * R is meaningful only when λ_min < 0 < λ_max; otherwise, or when it is not finite, the round
    has no boosting signal: S_k = 0 (so I_k = I_min) and R_k does not enter the window;
  * a window of at most one value (no spread to normalise by) gives S_k = 1;
  * R_max = R_min gives S_k = 1;
  * with a budget (``stop.budget_usd``) and ``budget_cap``, I_k is lowered until the predicted
    cost of the round fits what is left (``affordable_actors``), down to 0, which ends the job
    before the budget is overdrawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from faasrl import round_row as rr
from faasrl.controllers.base import BUDGET_READS, Controller, RoundContext, affordable_actors


def convexity_ratio(lambda_min: float | None, lambda_max: float | None) -> float | None:
    """R = -λ_max/λ_min, or None when it carries no signal (see the module's guards)."""
    if lambda_min is None or lambda_max is None:
        return None
    if not (math.isfinite(lambda_min) and math.isfinite(lambda_max)):
        return None
    if not lambda_min < 0 < lambda_max:
        return None
    return -lambda_max / lambda_min


def boosting_score(window: Sequence[float], k: int, decay: float) -> float:
    """S_k for the last value of ``window`` (the window includes R_k)."""
    if len(window) <= 1:
        return 1.0
    r_min, r_max = min(window), max(window)
    if r_max == r_min:
        return 1.0
    return (r_max - window[-1]) / (r_max - r_min) * decay**k


def scaled_actors(score: float, min_actors: int, max_actors: int) -> int:
    """I_k = clip(floor(I_max · S_k), I_min, I_max)."""
    return max(min_actors, min(max_actors, math.floor(max_actors * score)))


class Nitro(Controller):
    READS = (rr.HESSIAN_RATIO, *BUDGET_READS)

    def __init__(self, *, min_actors: int = 8, max_actors: int = 64, window: int = 6,
                 decay: float = 0.96, hessian_samples: int = 1024, hessian_iterations: int = 20,
                 budget_cap: bool = True):
        self.min_actors, self.max_actors = min_actors, max_actors
        self.window, self.decay, self.budget_cap = window, decay, budget_cap
        self.hessian = {"samples": hessian_samples, "iterations": hessian_iterations}
        self._last: dict[str, Any] = {}

    def actors(self, ctx: RoundContext) -> int:
        ratios = [r for row in ctx.history if (r := row.get(rr.HESSIAN_RATIO)) is not None]
        k = len(ctx.history)  # updates so far: round r's actors use the policy of update r
        has_signal = bool(ctx.history) and ctx.history[-1].get(rr.HESSIAN_RATIO) is not None
        window = ratios[-self.window:]
        if not ctx.history:
            score = 1.0  # no update yet: an empty window
        elif not has_signal:
            score = 0.0
        else:
            score = boosting_score(window, k, self.decay)
        n = scaled_actors(score, self.min_actors, self.max_actors)
        capped = affordable_actors(ctx, n) if self.budget_cap else n
        self._last = {"k": k, "ratio": window[-1] if has_signal else None,
                      "window": window if has_signal else [], "score": score, "wanted": n,
                      "budget_capped": capped < n}
        return capped

    def forecast(self, ctx: RoundContext) -> int:
        """The next R is not known before the update: pre-warm for a full boost (Nitro keeps
        I_max of provisioned concurrency for the same reason)."""
        return affordable_actors(ctx, self.max_actors) if self.budget_cap else self.max_actors

    def learner_requests(self) -> dict[str, Any]:
        return {"hessian": dict(self.hessian)}

    def explain(self) -> dict[str, Any]:
        return dict(self._last)
