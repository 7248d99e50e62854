"""A job's virtual clock: the executor its engine runs on, timed by the spec's calibration
(``clock: virtual``, docs/virtual-clock.md), and the virtual columns of a round's row; the
same for every workflow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from faasrl import round_row as rr
from faasrl.invoker import InvocationRecord
from faasrl.jobs.clock import Calibration, Role, VirtualSettings, draw, hessian_units, units
from faasrl.jobs.cost import Pricing, lambda_cost, vm_share_cost
from faasrl.workflow.engine import Engine
from faasrl.workflow.virtual_clock import Event, VirtualClock, VirtualExecutor


def job_clock(virtual: VirtualSettings | None, seed: int
              ) -> tuple[VirtualExecutor[int] | None, dict[str, float]]:
    """The engine's virtual clock and lower bounds (the calibration's); real time: none. The
    n-th invocation's duration spread is drawn from the job's seed, its role and n. The
    engine's kinds are the roles."""
    if virtual is None:
        return None, {}
    calibration = virtual.calibration

    def duration(start: Event[int], done: InvocationRecord | list[InvocationRecord]) -> float:
        role = cast(Role, start.function)
        return attempts_duration(calibration[role], role, done, draw(seed, role, start.key))

    clock: VirtualClock[int] = VirtualClock(cores=virtual.cores,
                                            concurrency=dict(virtual.concurrency))
    return (VirtualExecutor(clock, duration),
            {role: c.lower_bound for role, c in calibration.items()})


def attempts_duration(calibration: Calibration, role: Role,
                      done: InvocationRecord | list[InvocationRecord], z: float) -> float:
    """An invocation's virtual duration, or its attempts' one after another (the synchronous
    workflow invokes a slot again until it succeeds): a failed one does no work (it failed
    fast), so it lasts the calibration's ``a``."""
    tries = done if isinstance(done, list) else [done]
    return sum(calibration.duration(units(role, r.result), z, hessian_units(role, r.result))
               if r.status == "success" else calibration.duration(0.0, z) for r in tries)


@dataclass(frozen=True)
class Mark:
    """Where a round started on the engine's virtual clock: its time and what had ended."""

    now: float
    seconds: dict[str, float]
    ends: dict[str, int]


def mark(engine: Engine) -> Mark:
    return Mark(engine.now, dict(engine.virtual_seconds), dict(engine.virtual_ends))


def round_columns(engine: Engine, start: Mark, actors: Sequence[InvocationRecord],
                  pricing: Pricing) -> dict[str, float]:
    """A round's row on the virtual clock: its length (``virtual_s``), its actors' and
    learners' virtual time, and what the invocations that ended in it cost billed at their
    virtual durations (``virtual_cost_round``: actors as Lambda at their function's memory, the
    other roles as shares of the learner VM, as jobs/cost.py bills measured ones)."""
    actor = actor_columns(engine, start, actors, pricing)
    others = sum(vm_share_cost(_since(engine, start, kind)[0], pricing)
                 for kind in engine.virtual_seconds if kind != "actor")
    return {rr.VIRTUAL_S: engine.now - start.now,
            rr.VIRTUAL_COST_ROUND: actor[rr.VIRTUAL_COST_ACTORS] + others, **actor,
            rr.VIRTUAL_LEARNER_S: _since(engine, start, "learner")[0]}


def actor_columns(engine: Engine, start: Mark, actors: Sequence[InvocationRecord],
                  pricing: Pricing) -> dict[str, float | None]:
    """The actors' part of a round on the virtual clock so far: their mean virtual duration and
    their cost at it (a synchronous round's forecast reads them before its learner runs)."""
    seconds, ends = _since(engine, start, "actor")
    memory_mb = max((r.memory_mb for r in actors), default=0)
    return {rr.VIRTUAL_ACTOR_S_MEAN: seconds / ends if ends else None,
            rr.VIRTUAL_COST_ACTORS: lambda_cost(seconds, memory_mb, ends, pricing)}


def _since(engine: Engine, start: Mark, kind: str) -> tuple[float, int]:
    """The virtual seconds and ends of ``kind``'s invocations since ``start``."""
    return (engine.virtual_seconds.get(kind, 0.0) - start.seconds.get(kind, 0.0),
            engine.virtual_ends.get(kind, 0) - start.ends.get(kind, 0))


# What a controller reads of a row on the virtual clock: the modeled cluster's time and cost in
# place of the host's (a column the row lacks, as a forecast's row lacks its learner's, stays).
VIRTUAL_VIEW = {rr.ROUND_S: rr.VIRTUAL_S, rr.COST_ROUND: rr.VIRTUAL_COST_ROUND,
                rr.COST_ACTORS: rr.VIRTUAL_COST_ACTORS, rr.ACTOR_S_MEAN: rr.VIRTUAL_ACTOR_S_MEAN,
                rr.LEARNER_S: rr.VIRTUAL_LEARNER_S}


def virtual_view(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as a controller on the virtual clock sees it: its time and cost columns the
    virtual ones, and the learner's cost (``cost_learner``) the rest of the round's."""
    view = {**row, **{host: row[virtual] for host, virtual in VIRTUAL_VIEW.items()
                      if virtual in row}}
    if rr.VIRTUAL_COST_ROUND in row and rr.VIRTUAL_COST_ACTORS in row:
        view[rr.COST_LEARNER] = row[rr.VIRTUAL_COST_ROUND] - row[rr.VIRTUAL_COST_ACTORS]
    return view
