"""KungFu-style scaling: more actors as the gradient noise scale grows, never fewer.

The learner measures the gradient noise scale B_simple (``faasrl.rl.diagnostics``) of each
round's batch; a large noise scale means bigger batches still help. With (I_0, G_0) the start
count and the first valid measurement, round k gets

    I_k = max(I_{k-1}, min(I_max, round(I_0 · G_k / G_0)))

where G_k is the latest valid measurement: proportional to the growth of the noise scale, never
down (KungFu adapts by scaling up only). Non-positive or missing measurements are skipped.
"""

from __future__ import annotations

import math
from typing import Any

from faasrl import round_row as rr
from faasrl.controllers.base import Controller, RoundContext


class KungFu(Controller):
    READS = (rr.GNS,)

    def __init__(self, *, min_actors: int = 1, max_actors: int = 64, gns_parts: int = 4):
        self.start, self.max_actors, self.parts = min_actors, max_actors, gns_parts
        self._last: dict[str, Any] = {}

    def actors(self, ctx: RoundContext) -> int:
        n, first, latest = self.start, None, None
        for row in ctx.history:  # replay: the count only depends on the measurements so far
            g = row.get(rr.GNS)
            if g is None or not math.isfinite(g) or g <= 0:
                continue
            first = g if first is None else first
            latest = g
            n = max(n, min(self.max_actors, math.floor(self.start * g / first + 0.5)))
        self._last = {"gns": latest, "gns_first": first}
        return n

    def forecast(self, ctx: RoundContext) -> int:
        """The next noise scale is not known before the update: it may scale up to I_max."""
        return self.max_actors

    def learner_requests(self) -> dict[str, Any]:
        return {"gns": {"parts": self.parts}}

    def explain(self) -> dict[str, Any]:
        return dict(self._last)
