"""A job's virtual clock: the executor its engine runs on, timed by the spec's calibration
(``clock: virtual``, docs/virtual-clock.md), and the virtual columns of a round's row; the
same for every workflow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from faasrl import round_row as rr
from faasrl.invoker import InvocationRecord
from faasrl.jobs.clock import Calibration, Role, VirtualSettings, draw, units
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
    return sum(calibration.duration(units(role, r.result) if r.status == "success" else 0.0, z)
               for r in tries)


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
    """A round's row on the virtual clock: its length (``virtual_s``) and what the invocations
    that ended in it cost billed at their virtual durations (``virtual_cost_round``: actors as
    Lambda at their function's memory, the other roles as shares of the learner VM, as
    jobs/cost.py bills measured ones)."""
    memory_mb = max((r.memory_mb for r in actors), default=0)
    cost = 0.0
    for kind, seconds in engine.virtual_seconds.items():
        seconds -= start.seconds.get(kind, 0.0)
        ends = engine.virtual_ends.get(kind, 0) - start.ends.get(kind, 0)
        cost += lambda_cost(seconds, memory_mb, ends, pricing) if kind == "actor" \
            else vm_share_cost(seconds, pricing)
    return {rr.VIRTUAL_S: engine.now - start.now, rr.VIRTUAL_COST_ROUND: cost}
