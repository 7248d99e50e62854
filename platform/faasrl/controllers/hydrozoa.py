"""Hydrozoa-style scaling: double the actors on a fixed schedule, whatever the training does."""

from __future__ import annotations

from faasrl.controllers.base import Controller, RoundContext


class Hydrozoa(Controller):
    """I_k = min(I_max, start · 2^(k // every))."""

    def __init__(self, *, start: int = 1, every: int = 10, max_actors: int = 64):
        self.start, self.every, self.max_actors = start, every, max_actors

    def actors(self, ctx: RoundContext) -> int:
        return min(self.max_actors, self.start * 2 ** (ctx.round // self.every))
