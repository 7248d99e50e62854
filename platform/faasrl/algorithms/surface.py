"""An algorithm module's surface as Protocols: what the job spec, the functions and the
workflows call on it (the package docstring says what each member means).

A module conforms structurally — nothing subclasses these. :class:`Algorithm` is what every
module has; each execution adds the members its workflow calls (a workflow class names its
Protocol as ``ALGORITHM_SURFACE``). ``tests/unit/test_extension_points.py`` checks every
registered module against the Protocols of its ``EXECUTIONS``: members, callables, parameter
names.

No torch at run time here: the gateway imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

if TYPE_CHECKING:
    import numpy as np
    import torch

    from faasrl.algorithms import LearnerContext
    from faasrl.data.trajectories import TrajectorySchema
    from faasrl.rl.policy import PolicySpec
    from faasrl.rl.rollout import Steps


@runtime_checkable
class Algorithm(Protocol):
    """What every algorithm module exposes, whatever its execution."""

    NAME: str
    EXECUTIONS: tuple[str, ...]
    Config: type[BaseModel]
    FAMILY_DEFAULTS: dict[str, dict[str, Any]]

    def initial_state(self, cfg: Any) -> dict[str, Any]:
        """The state carried from one update to the next."""

    def make_model(self, spec: PolicySpec, cfg: Any) -> torch.nn.Module:
        """Everything the learner trains; its ``state_dict`` is one published version."""

    def make_optimizer(self, model: torch.nn.Module, cfg: Any) -> Any:
        """The optimizer of ``model`` (``state_dict``/``load_state_dict``)."""


@runtime_checkable
class OnPolicyAlgorithm(Algorithm, Protocol):
    """Actors write batches of whole rollouts (``sync`` and ``async``)."""

    def batch_schema(self, policy: PolicySpec, envs: int) -> TrajectorySchema:
        """The batch an actor writes."""

    def actor_batch(self, steps: Steps, cfg: Any) -> dict[str, np.ndarray]:
        """That batch, from a rollout's raw steps."""


@runtime_checkable
class SyncAlgorithm(OnPolicyAlgorithm, Protocol):
    """``execution: sync``: rounds of actors, then one learner update."""

    def update(self, model: Any, optimizer: Any, batch: dict[str, torch.Tensor], cfg: Any, *,
               generator: torch.Generator, lr: float | None = None,
               state: Mapping[str, Any] | None = None
               ) -> tuple[dict[str, float], dict[str, Any]]:
        """One learner update on a round's batch: (stats, state)."""

    def loss(self, model: Any, batch: Mapping[str, torch.Tensor], cfg: Any
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss on a minibatch (the gradient noise scale measures it)."""


@runtime_checkable
class AsyncAlgorithm(OnPolicyAlgorithm, Protocol):
    """``execution: async``: learners compute gradients for the parameter function."""

    def gradient(self, learner: LearnerContext, batches: Sequence[Mapping[str, torch.Tensor]],
                 cfg: Any) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        """One learner's gradient on the batches it was handed: (gradients, stats)."""


@runtime_checkable
class OffPolicyAlgorithm(Algorithm, Protocol):
    """``execution: offpolicy`` (:mod:`faasrl.algorithms.offpolicy` says what each means)."""

    ACTION_KINDS: tuple[str, ...]

    def act(self, model: Any, obs: torch.Tensor, cfg: Any, *, slot: int, actors: int,
            generator: torch.Generator | None, explore: bool = True) -> torch.Tensor:
        """A vector env's actions."""

    def greedy_slot(self, actors: int) -> int | None:
        """The actor slot whose episodes count toward ``target_reward``."""

    def priorities(self, model: Any, batch: dict[str, torch.Tensor], cfg: Any) -> torch.Tensor:
        """The initial |δ| of an actor's transitions."""

    def train(self, model: Any, optimizer: Any, batches: list[dict[str, torch.Tensor]],
              cfg: Any, state: dict[str, Any]
              ) -> tuple[dict[str, float], dict[str, Any], torch.Tensor]:
        """One learner invocation: (stats, state, new priorities)."""
