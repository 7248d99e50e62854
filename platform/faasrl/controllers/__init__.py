"""Per-round decisions: how many actors each round gets."""

from __future__ import annotations

from typing import Any

from faasrl.controllers.base import Controller, RoundContext
from faasrl.controllers.fixed import Fixed
from faasrl.controllers.schedule import Schedule


def build_controller(spec: Any) -> Controller:
    """A controller from its spec (``faasrl.jobs.spec.ControllerSpec``)."""
    if spec.name == "fixed":
        return Fixed(spec.actors)
    if spec.name == "schedule":
        return Schedule(spec.actors, start=spec.start, factor=spec.factor, step=spec.step,
                        every=spec.every, min_actors=spec.min_actors, max_actors=spec.max_actors)
    raise ValueError(f"unknown controller {spec.name!r}")


__all__ = ["Controller", "RoundContext", "build_controller"]
