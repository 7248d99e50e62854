"""Modeled-parallel time and cost: a simulation of a round where no invocation ever waits.

On a small node, a round's measured time mixes the algorithm with the node: eight actors on two
cores take four times as long as on eight, or queue for capacity. The deployment the seeds
assume (Lambda actors, a learner VM) gives every invocation its own core. The model takes the
round's measured records and removes exactly two waits from each invocation:

- its queueing for capacity (``queue_s``; a cold start's ``init_s`` stays: Lambda has them too);
- its handler thread's wait for a core during the run (``wait_s``, the runtime's schedstat
  measurement: ``run_s - wait_s`` is the run with a core of its own).

Everything else keeps its measured length: transfers, the runtime's HTTP exchange, and the
driver's own time between one invocation's end and the next one's request. The schedule keeps
its order: an invocation is taken to depend on every invocation that finished before it was
requested (the driver may have waited on any of them), and starts the driver's measured
reaction time after the last of those ends in the model. So the modeled round is never longer
than the measured one, and it never reorders work the driver did in sequence.

The modeled cost bills each invocation's modeled run (plus its billed cold start) at the
measured price: Lambda's for actors, the learner VM's share for everything else, as the
workflows bill them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from faasrl.invoker.records import InvocationRecord
from faasrl.jobs.cost import Pricing, actor_cost, learner_cost


def _saved_s(r: InvocationRecord) -> float:
    """What the model removes from one invocation: capacity queueing and core waits."""
    return r.capacity_wait_s + (r.wait_s or 0.0)


def parallel_round_s(records: Sequence[InvocationRecord], started_at: float,
                     ended_at: float) -> float:
    """The round's modeled length; ``started_at``/``ended_at`` are epoch seconds, like the
    records' ``requested_at``/``finished_at``. Invocations carried over from an earlier round
    count from the round's start, their savings in proportion; those that ended before it
    (an asynchronous round trains on batches rolled out earlier) add nothing."""
    done = sorted((r for r in records if r.finished_at is not None),
                  key=lambda r: r.requested_at)
    ends: list[tuple[float, float]] = []  # (measured finish, modeled finish), since started_at

    def start(requested: float) -> float:
        """Modeled start of a request at ``requested``: after the modeled end of the last
        invocation that finished before it, plus the driver's measured reaction time."""
        before = [(fin, end) for fin, end in ends if fin <= requested]
        if not before:
            return requested
        last = max(fin for fin, _ in before)
        return max(end for _, end in before) + (requested - last)

    for r in done:
        requested, finished = r.requested_at - started_at, r.finished_at - started_at
        span = finished - requested
        if span <= 0 or finished <= 0:
            continue  # an earlier round's time holds all of it (an async batch trained now)
        share = min(1.0, finished / span) if requested < 0 else 1.0
        modeled = max(0.0, span - _saved_s(r)) * share
        ends.append((finished, start(max(0.0, requested)) + modeled))
    return start(ended_at - started_at)


def _modeled(r: InvocationRecord) -> InvocationRecord:
    """The record billed for its modeled run: its core waits taken out."""
    return replace(r, billed_ms=max(0, r.billed_ms - math.floor((r.wait_s or 0.0) * 1000)))


def parallel_cost_usd(records: Iterable[InvocationRecord], actor_function: str,
                      pricing: Pricing) -> float:
    """The round's invocations billed for their modeled runs."""
    modeled = [_modeled(r) for r in records]
    return actor_cost([r for r in modeled if r.function == actor_function], pricing) \
        + learner_cost([r for r in modeled if r.function != actor_function], pricing)
