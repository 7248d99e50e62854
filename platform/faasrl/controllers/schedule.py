"""Actors per round from a list or a step rule (doubling, increasing, decreasing schedules)."""

from __future__ import annotations

from collections.abc import Sequence

from faasrl.controllers.base import Controller, RoundContext


class Schedule(Controller):
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
        n = round(self.start * self.factor**stage + self.step * stage)
        return max(self.min_actors, min(self.max_actors, n))
