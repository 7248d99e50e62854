"""Actors per round from a list or a step rule (doubling, increasing, decreasing schedules)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from faasrl.controllers.base import Controller, RoundContext


class ActorSchedule(Controller):
    """I_k from ``actors`` (its last value repeats) or ``round(start · factor^s + step · s)``
    with s = k // every, clipped to [min_actors, max_actors]; factor 2 is Hydrozoa."""

    def __init__(self, actors: Sequence[int] | None = None, *, start: int = 1,
                 factor: float = 1.0, step: int = 0, every: int = 1, min_actors: int = 1,
                 max_actors: int = 64):
        self.list = list(actors) if actors else None
        self.start, self.factor, self.step, self.every = start, factor, step, every
        self.min_actors, self.max_actors = min_actors, max_actors

    def actors(self, ctx: RoundContext) -> int:
        if self.list is not None:
            return self.list[min(ctx.round, len(self.list) - 1)]
        stage = ctx.round // self.every
        try:
            growth = self.factor**stage
        except OverflowError:  # a long job's doubling passed any float: the cap holds
            growth = math.inf
        n = self.start * growth + self.step * stage
        return round(max(self.min_actors, min(self.max_actors, n)))
