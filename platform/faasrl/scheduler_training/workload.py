"""A simulated synchronous RL workload, so a MinionsRL scheduler can be trained and tested in
seconds instead of hours.

It models what the scheduler's choice changes, per round with I actors: the round's time (the
slowest of I actors, which grows with log I, plus a learner whose time grows with the batch), its
cost (actor- and learner-seconds at a price), and the training progress (the gap to a ceiling
just above the target closes faster with more samples, with diminishing returns). So neither one
actor (too many rounds) nor I_max (long, costly rounds) is best: the best count lies in between
and depends on the job's state. Rows have the driver's keys, so the same controllers run on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from faasrl import round_row as rr
from faasrl.controllers.base import Controller, RoundContext


@dataclass
class SimulatedWorkload:
    target: float = 100.0  # J
    budget_usd: float | None = None  # B
    max_rounds: int = 150
    actor_s: float = 1.0  # one actor's rollout
    straggler: float = 0.3  # the slowest of I actors takes actor_s * (1 + straggler * ln I)
    learner_s: float = 0.3
    learner_per_actor_s: float = 0.25  # the learner's time grows with the batch
    gain: float = 0.15  # share of the gap to the ceiling closed per round with unlimited actors
    saturation: float = 3.0  # actors at which a round gets 63 % of that
    noise: float = 0.02  # of J, per round
    actor_usd_s: float = 2 * 0.0000166667  # a 2 GB Lambda actor
    learner_usd_s: float = 3.06 / 4 / 3600  # a quarter of a p3.2xlarge

    def run(self, controller: Controller, seed: int) -> tuple[list[dict[str, Any]], bool]:
        """One whole job: its metrics rows and whether it reached the target within budget."""
        rng = np.random.default_rng(seed)
        ceiling = 1.1 * self.target
        progress, cost, rows = 0.0, 0.0, []
        for k in range(self.max_rounds):
            left = None if self.budget_usd is None else self.budget_usd - cost
            ctx = RoundContext(k, rows, left, self.budget_usd, self.target, seed)
            n = controller.actors(ctx)
            if n < 1:
                break
            actor_times = self.actor_s * rng.uniform(0.9, 1.1, n)
            slowest = self.actor_s * (1 + self.straggler * math.log(n)) * rng.uniform(0.95, 1.05)
            actor_times[np.argmax(actor_times)] = max(slowest, actor_times.max())
            learner = (self.learner_s + self.learner_per_actor_s * n) * rng.uniform(0.95, 1.05)
            step = self.gain * (1 - math.exp(-n / self.saturation))
            progress += step * (ceiling - progress) + self.noise * self.target * rng.normal()
            cost_actors = float(actor_times.sum()) * self.actor_usd_s
            cost_learner = learner * self.learner_usd_s
            cost += cost_actors + cost_learner
            rows.append({
                rr.ROUND: k, rr.ACTORS: n, rr.MEAN_RETURN: progress,
                rr.LOSS: (ceiling - progress) / self.target, rr.POLICY_KL: 0.05 * step,
                rr.LEARNER_S: learner, rr.ACTOR_S_MEAN: float(actor_times.mean()),
                rr.ROUND_S: float(actor_times.max()) + learner, rr.COST_ACTORS: cost_actors,
                rr.COST_LEARNER: cost_learner, rr.COST_ROUND: cost_actors + cost_learner,
                rr.COST_TOTAL: cost, rr.CONTROLLER: controller.explain()})
            if progress >= self.target:
                return rows, True
            if self.budget_usd is not None and cost >= self.budget_usd:
                break
        return rows, False
