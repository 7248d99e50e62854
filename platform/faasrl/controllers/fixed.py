"""The same number of actors every round."""

from __future__ import annotations

from faasrl.controllers.base import Controller, RoundContext


class Fixed(Controller):
    def __init__(self, actors: int):
        self.n = actors

    def actors(self, ctx: RoundContext) -> int:
        return self.n
