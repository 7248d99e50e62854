"""Per-round decisions: how many actors each round gets.

fixed, schedule (hydrozoa is a doubling schedule), minions (+ minions-adapt, minions-max), nitro,
kungfu, registered in :data:`~faasrl.controllers.spec.CONTROLLERS`. None of them imports torch:
they run in the job driver, inside the gateway.
"""

from __future__ import annotations

from pathlib import Path

from faasrl.controllers.base import Controller, RoundContext
from faasrl.controllers.spec import CONTROLLERS, ControllerEntry


def build_controller(spec: ControllerEntry, *, schedulers: Path | None = None) -> Controller:
    """A controller from its spec (``faasrl.controllers.spec.ControllerSpec``); ``schedulers``
    is the folder MinionsRL loads saved schedulers from."""
    return spec.build(schedulers=schedulers)


__all__ = ["CONTROLLERS", "Controller", "ControllerEntry", "RoundContext", "build_controller"]
