"""The controller interface: once per round, how many actors the round gets.

A controller decides from the job's metrics rows so far (``RoundContext.history``), so the ones
here keep no state of their own and a resumed job continues exactly where it was. It may ask the
learner for extra measurements (the Hessian ratio, the gradient noise scale), which come back in
the rows. Each one names the columns it reads (``READS``, from :mod:`faasrl.round_row`); before
a forecast the last row is the round's so far: what its actors told (``workflow/sync.py``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from faasrl import round_row as rr


@dataclass
class RoundContext:
    """What a controller sees before round ``round`` (counted from 0)."""

    round: int
    history: list[dict[str, Any]] = field(default_factory=list)  # metrics rows so far
    budget_left_usd: float | None = None
    budget_usd: float | None = None  # the job's stop.budget_usd (B)
    target_reward: float | None = None  # the job's stop.target_reward (J)
    seed: int = 0


# What affordable_actors reads: the last round's actors and costs.
BUDGET_READS = (rr.ACTORS, rr.COST_ACTORS, rr.COST_LEARNER)


class Controller(ABC):
    READS: tuple[str, ...] = ()  # the metrics columns it decides on
    @abstractmethod
    def actors(self, ctx: RoundContext) -> int:
        """I_k: the number of actor functions to invoke in this round; 0 ends the job (the
        remaining budget cannot pay for another round)."""

    def forecast(self, ctx: RoundContext) -> int:
        """An upper bound on round ``ctx.round``'s actors, asked while the previous round's
        learner still runs (so the last row of ``ctx.history`` has only its actors' columns:
        round, actors, mean_return, actor_s_mean, actor_s_max, cost_actors): the driver
        pre-warms this many actor containers so a boosted round pays no cold starts. The
        default, the decision itself, is exact for controllers that need no learner column."""
        return self.actors(ctx)

    def learner_requests(self) -> dict[str, Any]:
        """Extra measurements the learner makes after each update for this controller, merged
        into its arguments (``{"hessian": {...}}``, ``{"gns": {...}}``)."""
        return {}

    def explain(self) -> dict[str, Any]:
        """JSON-able details of the last decision, stored in the round's metrics row."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state, checkpointed with the job (the controllers here keep none)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what ``state_dict`` returned."""


def last_valid(history: list[dict[str, Any]], key: str) -> float | None:
    """The most recent finite value of ``key`` in the rows, or None."""
    for row in reversed(history):
        value = row.get(key)
        if value is not None and math.isfinite(value):
            return float(value)
    return None


def affordable_actors(ctx: RoundContext, wanted: int) -> int:
    """``wanted`` capped so that the round's predicted cost fits the remaining budget.

    Prediction from the last round (with n_0 actors, actor cost A, learner cost L): a round with
    n actors costs n·A/n_0 + L·max(1, n/n_0) — actors bill per actor, and the learner's time
    grows with the batch above n_0 but is taken as no smaller below it (conservative). Returns 0
    when not even one actor fits; without a budget or a previous round, ``wanted``.
    """
    if ctx.budget_left_usd is None or not ctx.history:
        return wanted
    last = ctx.history[-1]
    n0 = max(1, int(last[rr.ACTORS]))
    # a forecast's last row has no learner yet: take the learner cost of the one before
    per_actor = last[rr.COST_ACTORS] / n0
    learner = last_valid(ctx.history, rr.COST_LEARNER) or 0.0
    n = wanted
    while n > 0 and n * per_actor + learner * max(1.0, n / n0) > ctx.budget_left_usd:
        n -= 1
    return n
