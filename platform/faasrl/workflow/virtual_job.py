"""A job's virtual clock: the executor its engine runs on, timed by the spec's calibration
(``clock: virtual``, docs/virtual-clock.md), the same for every workflow."""

from __future__ import annotations

from typing import cast

from faasrl.invoker import InvocationRecord
from faasrl.jobs.clock import Calibration, Role, VirtualSettings, draw, units
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
