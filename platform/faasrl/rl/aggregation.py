"""When a parameter function aggregates the gradients it has queued, and with what weights.

A gradient's staleness is δ = c_now - c_used: how many aggregations (the parameter function's
clock ticks once per aggregation) happened since the policy its learner computed it on. The
parameter function enqueues gradients one at a time and, after each, asks its rule whether to
aggregate the whole queue now; an aggregation applies g = (1/H) Σ w_j g_j and ticks the clock.

- ``stellaris`` (the paper's Eq. 3-4): in round 0 every gradient is applied at once (no
  threshold) while the staleness it sees is recorded; that gives δ_max (the paper: the maximum;
  the authors' code: int(mean) + 1). From round k ≥ 1 the queue is aggregated when its mean
  staleness is ≤ β_k = δ_max · d^k. Weights w = δ^(-1/v) (1 for δ = 0), i.e. a per-gradient
  step size α_0 / δ^(1/v). d = 1 is fully asynchronous, d → 0 synchronous.
- ``async``: every gradient is applied as it arrives, weight 1 (no staleness control).
- ``softsync`` (Zhang et al.): aggregate every K gradients, weight 1.
- ``ssp`` (Ho et al., bounded staleness s): a gradient staler than s is dropped, and the queue
  waits while an aggregation would leave a learner still computing more than s clocks behind.

Liveness: a threshold that nothing fresher can satisfy would wait forever, so ``stellaris`` and
``ssp`` also aggregate when the queue holds as many gradients as there are learners, and the
parameter function flushes every rule's queue at the end of each round.

Pure Python: the rules see staleness numbers, never tensors; :func:`combine` does the sum.
"""

from __future__ import annotations

import statistics
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import torch

RULES: tuple[str, ...] = ("stellaris", "async", "softsync", "ssp")


class AggregationRule(ABC):
    """One rule's decisions; ``state_dict`` is what a restarted parameter function needs."""

    name: str

    def admit(self, staleness: int) -> bool:
        """Whether a gradient this stale may join the queue (else it is dropped)."""
        return True

    @abstractmethod
    def ready(self, queue: Sequence[int], *, learners: int, in_flight: Sequence[int] = ()
              ) -> str | None:
        """Why the queue (its gradients' staleness, newest last) should be aggregated now, or
        None to wait. ``in_flight``: the staleness each learner still computing would have
        after one more aggregation."""

    def weights(self, staleness: Sequence[int]) -> list[float]:
        """Per-gradient step-size factors α_j / α_0."""
        return [1.0] * len(staleness)

    def aggregated(self, staleness: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Called after every aggregation with the staleness of what it applied."""

    def end_round(self) -> None:  # noqa: B027 - optional hook
        """Called once at the end of every round, after the round's flush."""

    def threshold(self) -> float | None:
        """The current staleness threshold, where the rule has one (for the metrics)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - stateless
        """Restore what ``state_dict`` returned."""


class Stellaris(AggregationRule):
    name = "stellaris"

    def __init__(self, *, decay: float = 0.96, root: float = 3.0,
                 delta_max: str = "max") -> None:
        if not 0 < decay <= 1:
            raise ValueError("decay must be in (0, 1]")
        if root <= 0:
            raise ValueError("root must be positive")
        if delta_max not in ("max", "mean"):
            raise ValueError("delta_max must be 'max' (the paper) or 'mean' (int(mean) + 1)")
        self.decay, self.root, self.delta_max_rule = decay, root, delta_max
        self.round = 0
        self.delta_max: float | None = None  # None until a bootstrap round saw a gradient
        self._seen: list[int] = []  # staleness applied while bootstrapping

    def threshold(self) -> float | None:
        return None if self.delta_max is None else self.delta_max * self.decay**self.round

    def ready(self, queue: Sequence[int], *, learners: int, in_flight: Sequence[int] = ()
              ) -> str | None:
        beta = self.threshold()
        if beta is None:
            return "bootstrap"
        if statistics.fmean(queue) <= beta:
            return "threshold"
        if len(queue) >= learners:
            return "liveness"
        return None

    def weights(self, staleness: Sequence[int]) -> list[float]:
        return [1.0 if d <= 0 else d ** (-1.0 / self.root) for d in staleness]

    def aggregated(self, staleness: Sequence[int]) -> None:
        if self.delta_max is None:
            self._seen.extend(staleness)

    def end_round(self) -> None:
        if self.delta_max is None and self._seen:
            self.delta_max = float(max(self._seen) if self.delta_max_rule == "max"
                                   else int(statistics.fmean(self._seen)) + 1)
            self._seen = []
        self.round += 1

    def state_dict(self) -> dict[str, Any]:
        return {"round": self.round, "delta_max": self.delta_max, "seen": self._seen}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.round = int(state.get("round", 0))
        self.delta_max = state.get("delta_max")
        self._seen = [int(x) for x in state.get("seen", [])]


class Async(AggregationRule):
    name = "async"

    def ready(self, queue: Sequence[int], *, learners: int, in_flight: Sequence[int] = ()
              ) -> str | None:
        return "arrival"


class SoftSync(AggregationRule):
    name = "softsync"

    def __init__(self, *, k: int) -> None:
        if k < 1:
            raise ValueError("softsync needs k >= 1")
        self.k = k

    def ready(self, queue: Sequence[int], *, learners: int, in_flight: Sequence[int] = ()
              ) -> str | None:
        return "k gradients" if len(queue) >= self.k else None


class SSP(AggregationRule):
    name = "ssp"

    def __init__(self, *, s: int) -> None:
        if s < 0:
            raise ValueError("ssp needs s >= 0")
        self.s = s

    def admit(self, staleness: int) -> bool:
        return staleness <= self.s

    def ready(self, queue: Sequence[int], *, learners: int, in_flight: Sequence[int] = ()
              ) -> str | None:
        if all(d <= self.s for d in in_flight):
            return "bounded"
        if len(queue) >= learners:
            return "liveness"
        return None


def build_rule(name: str, **params: Any) -> AggregationRule:
    """A rule by name: stellaris(decay, root, delta_max), async(), softsync(k), ssp(s)."""
    rules: dict[str, type[AggregationRule]] = {"stellaris": Stellaris, "async": Async,
                                                "softsync": SoftSync, "ssp": SSP}
    if name not in rules:
        raise ValueError(f"aggregation rule must be one of {RULES}, not {name!r}")
    return rules[name](**params)


def combine(gradients: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float]
            ) -> dict[str, torch.Tensor]:
    """(1/H) Σ w_j g_j over the H gradients, per parameter."""
    if not gradients or len(gradients) != len(weights):
        raise ValueError("combine needs one weight per gradient, and at least one gradient")
    h = len(gradients)
    return {name: sum(w * g[name] for w, g in zip(weights, gradients, strict=True)) / h
            for name in gradients[0]}
