"""What a job is timed on: real time, or a virtual clock that models a cluster of N cores.

On the virtual clock (docs/virtual-clock.md) every invocation still runs for real, but the
workflow sees its start and its result in the order the modeled cluster would produce them. An
invocation's virtual duration is not what it measured (that depends on the host's load) but a
calibration of its role: ``a + b * units``, where units is the work its result reports, so the
order, and what the job learns, is a function of the spec and its seeds: a replay (the same spec
run again) gives the same rows, but for the columns that measure the host (``HOST_COLUMNS``, named
in :mod:`faasrl.round_row`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, PositiveInt

from faasrl.round_row import HOST_COLUMNS
from faasrl.user_input import STRICT

Clock = Literal["real", "virtual"]
Role = Literal["actor", "learner", "parameter", "buffer"]
ROLES: tuple[Role, ...] = ("actor", "learner", "parameter", "buffer")
# The roles each workflow (the spec's ``execution``) invokes: a virtual clock needs their
# calibrations.
EXECUTION_ROLES: dict[str, tuple[Role, ...]] = {
    "sync": ("actor", "learner"), "async": ("actor", "learner", "parameter"),
    "offpolicy": ("actor", "learner", "buffer")}
# A role's units of work: the fields of its result that count them, summed over those it has
# (an actor's env steps, RolloutResult and ExploreResult; a learner's samples, GradientResult,
# UpdateResult and TrainResult; the parameter function's aggregations, StepResult and
# FlushResult; the buffer function's transitions moved, inserted by an ingest (IngestResult)
# or sampled for the learner (SampleResult): both copy rows in and out of the memory).
UNIT_FIELDS: dict[Role, tuple[str, ...]] = {
    "actor": ("steps",), "learner": ("samples",), "parameter": ("aggregations",),
    "buffer": ("added", "rows")}


def counts_units(role: Role, result: Mapping[str, Any]) -> bool:
    """Whether ``result`` reports the role's units (a learner's init does not)."""
    return any(f in result for f in UNIT_FIELDS[role])


def units(role: Role, result: Mapping[str, Any]) -> float:
    """The work a successful invocation of ``role`` reports (its result, as JSON)."""
    if not counts_units(role, result):
        raise KeyError(f"a {role}'s result reports none of {', '.join(UNIT_FIELDS[role])}")
    return float(sum(result.get(f, 0) for f in UNIT_FIELDS[role]))


def hessian_units(role: Role, result: Mapping[str, Any]) -> float:
    """The Hessian-vector products a synchronous learner's update ran on top of its samples
    when its controller asked for the loss Hessian (Nitro), each on one sample: the subset's
    samples times the Lanczos steps taken. None for other roles, nor without a Hessian."""
    hessian = result.get("hessian") if role == "learner" else None
    return float(hessian["samples"] * hessian["iterations"]) if hessian else 0.0


class Calibration(BaseModel):
    """A role's virtual duration: ``a + b * units`` seconds on average, spread lognormally by
    ``sd``. The spread matters: invocations of equal durations stay in lockstep (eight actors
    that start together end together, round after round), which real ones never do."""

    model_config = STRICT
    a: float = Field(ge=0, le=3600, description="seconds per invocation; also a failed one's "
                                                "(it failed fast)")
    b: float = Field(0.0, ge=0, le=60, description="seconds per unit of work: an actor's env "
                                                   "step, a learner's sample, an aggregation, "
                                                   "a transition the buffer inserts or samples")
    sd: float = Field(0.0, ge=0, le=2, description="the standard deviation of log(duration / "
                                                   "(a + b * units)); 0: every duration exact")
    hessian: float = Field(0.0, ge=0, le=60, description="a learner's seconds per sample per "
                                                         "Lanczos step of a loss Hessian its "
                                                         "controller asks for (Nitro)")

    def duration(self, units: float, z: float = 0.0, hessian_units: float = 0.0) -> float:
        """For a standard normal draw ``z`` (cut at ±Z_CUT): mean a + b·units (+ the Hessian's
        products at ``hessian`` each) over the draws."""
        z = max(-Z_CUT, min(Z_CUT, z))
        mean = self.a + self.b * units + self.hessian * hessian_units
        return mean * math.exp(self.sd * z - self.sd ** 2 / 2)

    @property
    def lower_bound(self) -> float:
        """No invocation of the role takes less (nor does a failed one, given this)."""
        return self.duration(0.0, -Z_CUT)


Z_CUT = 3.0  # the spread's draws are cut here, so that durations have a lower bound


def draw(seed: int, role: Role, n: int) -> float:
    """The standard normal draw of a job's invocation (``n``: its number in the run): a
    function of the job's seed, the role and n only, so a replay draws the same (``random``
    seeds from a string through SHA-512, not Python's per-process hash)."""
    return random.Random(f"{seed}:{role}:{n}").gauss(0.0, 1.0)


class VirtualSettings(BaseModel):
    """The modeled cluster a ``clock: virtual`` job is timed on."""

    model_config = STRICT
    cores: int = Field(ge=1, le=4096, description="invocations that run at once, each on a "
                                                  "core of its own")
    concurrency: dict[Role, PositiveInt] = Field(
        default_factory=dict, description="per role, at most this many at once "
                                          "(e.g. learner: 4)")
    calibration: dict[Role, Calibration] = Field(
        description="per role the job invokes (actor and learner; async: parameter; "
                    "offpolicy: buffer), its virtual duration (how to measure it: "
                    "docs/virtual-clock.md)")


def replay_differences(rows: list[dict[str, Any]], replayed: list[dict[str, Any]]
                       ) -> list[str]:
    """Where a replay's rows differ from the original's, but for ``HOST_COLUMNS``: one line
    per differing column (empty: an exact replay)."""
    out = [] if len(rows) == len(replayed) else [f"{len(rows)} rows, replayed "
                                                 f"{len(replayed)}"]
    for row, again in zip(rows, replayed, strict=False):
        for key in sorted((row.keys() | again.keys()) - HOST_COLUMNS):
            if row.get(key) != again.get(key):
                out.append(f"round {row.get('round')}: {key} {row.get(key)!r}, replayed "
                           f"{again.get(key)!r}")
    return out
