"""The training algorithms, one module each, CleanRL-style: a module reads top to bottom and owns
everything that makes it that algorithm; the platform (job spec, functions, drivers) only looks
them up here by the job's ``algorithm``.

What every algorithm module exposes (the next one copies this list;
:mod:`~faasrl.algorithms.surface` states it as Protocols every registered module is tested on):

``NAME``
    the job spec's ``algorithm``.
``EXECUTIONS``
    the executions it supports (``"sync"``: rounds of actors then one learner update;
    ``"async"``: Stellaris-style learners computing gradients for the parameter function;
    ``"offpolicy"``: a replay-buffer function between actors and learner, whose module surface
    :mod:`~faasrl.algorithms.offpolicy` describes); the first is a job's default.
``Config``
    one pydantic model (``faasrl.user_input.STRICT``), named ``<NAME>Config`` (``PPOConfig``: its
    schema's title in the API, which clients generated from it name their class by, so it must
    be unique) and exported as ``Config`` too; the single source of its hyper-parameters,
    their bounds and defaults; a field ``algorithm: Literal[NAME]`` tags it in the job spec's
    union. Every Config has ``learning_rate`` and ``anneal_lr`` (the optimizer the learner or
    the parameter function owns: :func:`annealed_lr`), ``adam_eps`` (its Adam's ε), ``gamma``
    (actors bootstrap episodes cut by a time limit with it, and MuJoCo envs normalise rewards
    with it) and ``model``, the network (:mod:`faasrl.rl.model_spec`: hidden widths,
    activation, CNN; PPO's and IMPACT's shared trunk too).
``make_model(spec: PolicySpec, cfg) -> nn.Module``
    the network of ``cfg.model`` over the env's observations and actions (``spec``, as
    :func:`faasrl.rl.policy.policy_spec_for` reads them), target networks included; its
    ``spec`` is the one it was built from, network included (what the job record and the model
    file show). Actors, learners and the parameter function all build their model with it.
``make_optimizer(model, cfg)``
    the optimizer of ``model`` (one Adam with ``cfg.adam_eps``, or SAC's several, with
    ``state_dict``/``load_state_dict``): the learner's, or the parameter function's.
``FAMILY_DEFAULTS``
    per env family (``faasrl.rl.envs.env_family``: classic, mujoco, atari, other), the job-spec
    fields it fills when a job leaves them out: ``envs_per_actor``, ``steps_per_actor`` and
    ``hyperparameters`` (overrides of Config's defaults).
``batch_schema(policy, envs) -> TrajectorySchema``
    the batch an actor writes: keys, dtypes, shapes, checked before anyone trains on it.
``actor_batch(steps, cfg) -> dict[str, np.ndarray]``
    what an actor computes from a rollout's raw steps (``faasrl.rl.rollout.Steps``) to make
    that batch (PPO: GAE).
``initial_state(cfg) -> dict``
    what the algorithm carries from one update to the next (PPO: its adaptive ``kl_coef``);
    the learner returns it after every update and gets it back with the next one.
``update(model, optimizer, batch, cfg, *, generator, lr, state) -> (stats, state)``
    with ``"sync"``: one learner update on a round's batch; and ``loss(model, batch, cfg)``,
    its loss on a minibatch (the gradient noise scale measures it).
``gradient(learner, batches, cfg) -> (gradients, stats)``
    with ``"async"``: one learner's gradient on the batches it was handed
    (:class:`LearnerContext`: its networks, peers and published versions).

Modules import torch guarded (``torch = None`` without it): the gateway, which has no torch,
validates job specs with their Configs. Adding an algorithm is one module and one line in
``ALGORITHMS`` below (the job spec's ``algorithm`` and ``hyperparameters`` follow from it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from faasrl.algorithms import dqn, impact, ppo, sac
from faasrl.registry import Registry

if TYPE_CHECKING:
    import torch

    from faasrl.rl.policy import ActorCritic

ALGORITHMS: Registry[ModuleType] = Registry("algorithm")  # modules: surface.Algorithm
ALGORITHMS.register(ppo.NAME, ppo)
ALGORITHMS.register(impact.NAME, impact)
ALGORITHMS.register(dqn.NAME, dqn)
ALGORITHMS.register(sac.NAME, sac)

AlgorithmName = ALGORITHMS.literal()
# A job's hyper-parameters: the Config of its algorithm, told apart by their ``algorithm`` tag.
AlgorithmConfig = Annotated[Union[tuple(m.Config for m in ALGORITHMS.values())],  # type: ignore[valid-type] # noqa: UP007
                            Field(discriminator="algorithm")]


def algorithm(name: str) -> ModuleType:
    """The module of algorithm ``name``."""
    return ALGORITHMS.require(name)


def annealed_lr(cfg: Any, round: int, total_rounds: int | None) -> float:
    """The learning rate of ``cfg`` for 0-based ``round``: linear to 0 over ``total_rounds`` when
    ``cfg.anneal_lr``."""
    if not cfg.anneal_lr or total_rounds is None:
        return cfg.learning_rate
    return cfg.learning_rate * max(0.0, 1.0 - round / total_rounds)


@dataclass
class LearnerContext:
    """What an asynchronous learner hands an algorithm's ``gradient``: its current network (the
    gradient is of its parameters), a second one of the same shape to evaluate other weights
    with, the clock (the published version ``model`` holds), and lookups of its concurrent
    peers' weights (those they registered, or the versions the workflow pinned) and of a
    published version's (None once evicted)."""

    model: ActorCritic
    other: ActorCritic
    clock: int
    peers: Callable[[], list[dict[str, torch.Tensor]]]
    version: Callable[[int], dict[str, torch.Tensor] | None]
