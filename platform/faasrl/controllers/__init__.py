"""Per-round decisions: how many actors each round gets.

fixed, schedule (hydrozoa is a doubling schedule), minions (+ minions-adapt, minions-max), nitro,
kungfu. None of them imports torch: they run in the job driver, inside the gateway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faasrl.controllers.base import Controller, RoundContext
from faasrl.controllers.fixed import Fixed
from faasrl.controllers.kungfu import KungFu
from faasrl.controllers.minions import Minions, MinionsAdapt
from faasrl.controllers.nitro import Nitro
from faasrl.controllers.schedule import Schedule
from faasrl.controllers.schedulers import load_scheduler


def build_controller(spec: Any, *, schedulers: Path | None = None) -> Controller:
    """A controller from its spec (``faasrl.controllers.spec.ControllerSpec``); ``schedulers``
    is the folder MinionsRL loads saved schedulers from."""
    fields = spec.model_dump(exclude={"name"})
    match spec.name:
        case "fixed":
            return Fixed(spec.actors)
        case "schedule":
            return Schedule(spec.actors, start=spec.start, factor=spec.factor, step=spec.step,
                            every=spec.every, min_actors=spec.min_actors,
                            max_actors=spec.max_actors)
        case "minions":
            if schedulers is None:
                raise ValueError("minions needs the schedulers folder")
            weights, _ = load_scheduler(schedulers, spec.scheduler)
            return Minions(weights, sample=spec.sample)
        case "minions-adapt":
            return MinionsAdapt(**fields)
        case "minions-max":
            return Fixed(spec.max_actors)
        case "nitro":
            return Nitro(**fields)
        case "kungfu":
            return KungFu(**fields)
        case "hydrozoa":
            return Schedule(start=spec.start, factor=2, every=spec.every,
                            max_actors=spec.max_actors)
    raise ValueError(f"unknown controller {spec.name!r}")


__all__ = ["Controller", "RoundContext", "build_controller"]
