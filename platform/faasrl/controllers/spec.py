"""The ``controller`` section of a job spec: one pydantic model per controller, registered by
name in :data:`CONTROLLERS`; each builds its controller.

Adding a controller is its :class:`~faasrl.controllers.base.Controller` subclass and a model
here, decorated with ``@CONTROLLERS.register(<name>)``: the job spec's union follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Protocol, Union, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from faasrl.controllers.actor_schedule import ActorSchedule
from faasrl.controllers.base import Controller
from faasrl.controllers.fixed import Fixed
from faasrl.controllers.kungfu import KungFu
from faasrl.controllers.minions import Minions, MinionsAdapt
from faasrl.controllers.nitro import Nitro
from faasrl.controllers.saved_schedulers import SCHEDULER_NAME, load_scheduler
from faasrl.registry import Registry
from faasrl.user_input import STRICT


@runtime_checkable
class ControllerEntry(Protocol):
    """A registered controller: a strict pydantic model of its job-spec section, tagged by a
    field ``name: Literal[<its registered name>]``, that builds the controller."""

    name: str

    def build(self, *, schedulers: Path | None = None) -> Controller:
        """The controller; ``schedulers`` is the folder MinionsRL loads saved ones from."""


CONTROLLERS: Registry[type[BaseModel]] = Registry("controller")  # models: ControllerEntry


class _Bounded(BaseModel):
    model_config = STRICT
    min_actors: int = Field(1, ge=1, le=1024)
    max_actors: int = Field(64, ge=1, le=1024)

    @model_validator(mode="after")
    def _bounds(self) -> _Bounded:
        if self.min_actors > self.max_actors:
            raise ValueError("min_actors must not exceed max_actors")
        return self


@CONTROLLERS.register("fixed")
class FixedController(BaseModel):
    """The same number of actors every round (the "Azure ML" baseline)."""

    model_config = STRICT
    name: Literal["fixed"] = "fixed"
    actors: int = Field(2, ge=1, le=1024)

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return Fixed(self.actors)


@CONTROLLERS.register("schedule")
class ScheduleController(_Bounded):
    """Actors per round from a list (its last value repeats), or from a step rule:
    ``round(start * factor**(k // every) + step * (k // every))`` clipped to [min, max] —
    factor 2 is Hydrozoa-style doubling, step ±1 MinionsRL's increasing/decreasing schedules."""

    name: Literal["schedule"] = "schedule"
    actors: list[Annotated[int, Field(ge=1, le=1024)]] | None = Field(None, min_length=1)
    start: int = Field(1, ge=1, le=1024)
    factor: float = Field(1.0, gt=0)
    step: int = 0
    every: int = Field(1, ge=1)

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return ActorSchedule(self.actors, start=self.start, factor=self.factor, step=self.step,
                        every=self.every, min_actors=self.min_actors,
                        max_actors=self.max_actors)


@CONTROLLERS.register("minions")
class MinionsController(BaseModel):
    """MinionsRL: a trained PPO scheduler picks I_k in 1..I_max from the 8-feature state."""

    model_config = STRICT
    name: Literal["minions"] = "minions"
    scheduler: str = Field(pattern=SCHEDULER_NAME.pattern,
                           description="a saved scheduler, <state_dir>/schedulers/<name>")
    sample: bool = Field(False, description="sample I_k from the policy (training) instead of "
                                            "taking its most likely value")

    def build(self, *, schedulers: Path | None = None) -> Controller:
        if schedulers is None:
            raise ValueError("minions needs the schedulers folder")
        weights, _ = load_scheduler(schedulers, self.scheduler)
        return Minions(weights, sample=self.sample)


@CONTROLLERS.register("minions-adapt")
class MinionsAdaptController(BaseModel):
    """MinionsRL-Adapt: I_k = clip(round(mean of the last n rounds' mean returns / J · I_max),
    1, I_max); J is the job's ``stop.target_reward``."""

    model_config = STRICT
    name: Literal["minions-adapt"] = "minions-adapt"
    max_actors: int = Field(32, ge=1, le=1024)
    window: int = Field(5, ge=1, le=1000)

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return MinionsAdapt(max_actors=self.max_actors, window=self.window)


@CONTROLLERS.register("minions-max")
class MinionsMaxController(BaseModel):
    """MinionsRL-Max: I_max actors every round."""

    model_config = STRICT
    name: Literal["minions-max"] = "minions-max"
    max_actors: int = Field(32, ge=1, le=1024)

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return Fixed(self.max_actors)


@CONTROLLERS.register("nitro")
class NitroController(_Bounded):
    """Nitro: boost when the surrogate's Hessian ratio R is low within its recent window."""

    name: Literal["nitro"] = "nitro"
    min_actors: int = Field(8, ge=1, le=1024)
    window: int = Field(6, ge=1, le=1000, description="n: values of R in the window")
    decay: float = Field(0.96, gt=0, le=1, description="d in S_k = ... x d^k")
    hessian_samples: int = Field(1024, ge=2, le=1_000_000,
                                 description="rows of the round's batch the Hessian uses")
    hessian_iterations: int = Field(20, ge=2, le=1000, description="Lanczos steps")
    budget_cap: bool = Field(True, description="cap I_k so the predicted round cost fits the "
                                               "remaining stop.budget_usd")

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return Nitro(**self.model_dump(exclude={"name"}))


@CONTROLLERS.register("kungfu")
class KungFuController(_Bounded):
    """KungFu: scale actors up in proportion to the gradient noise scale, never down."""

    name: Literal["kungfu"] = "kungfu"
    gns_parts: int = Field(4, ge=2, le=1024, description="minibatches the GNS estimate uses")

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return KungFu(**self.model_dump(exclude={"name"}))


@CONTROLLERS.register("hydrozoa")
class HydrozoaController(BaseModel):
    """Hydrozoa: double the actors every ``every`` rounds, up to ``max_actors`` (a schedule with
    factor 2, kept under its own name for existing job specs)."""

    model_config = STRICT
    name: Literal["hydrozoa"] = "hydrozoa"
    start: int = Field(1, ge=1, le=1024)
    every: int = Field(10, ge=1)
    max_actors: int = Field(64, ge=1, le=1024)

    def build(self, *, schedulers: Path | None = None) -> Controller:
        return ActorSchedule(start=self.start, factor=2, every=self.every,
                        max_actors=self.max_actors)


ControllerSpec = Annotated[Union[tuple(CONTROLLERS.values())],  # type: ignore[valid-type] # noqa: UP007
                           Field(discriminator="name")]
