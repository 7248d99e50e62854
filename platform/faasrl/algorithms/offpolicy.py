"""What every off-policy algorithm shares (``execution: offpolicy``): the replay settings its
Config inherits, and the module surface the actor, buffer and learner functions call.

An off-policy module (:mod:`~faasrl.algorithms.dqn`, :mod:`~faasrl.algorithms.sac`) exposes,
besides ``NAME``, ``EXECUTIONS = ("offpolicy",)``, ``Config`` (a :class:`ReplayConfig`) and
``FAMILY_DEFAULTS``:

``ACTION_KINDS``
    the action spaces it handles (``"discrete"``, ``"continuous"``); a job on another is a 422.
``make_model(spec: PolicySpec, cfg) -> nn.Module`` (as every algorithm's)
    everything the learner trains, target networks included: its ``state_dict`` is one
    published version, which actors load whole (they need the target net for priorities).
``make_optimizer(model, cfg)`` (as every algorithm's)
    an object with ``state_dict``/``load_state_dict`` (one Adam, or SAC's several).
``act(model, obs, cfg, *, slot, actors, generator, explore=True) -> torch.Tensor``
    a vector env's actions; ``slot`` of ``actors`` picks an Ape-X actor's own ε.
``greedy_slot(actors) -> int | None``
    the actor slot whose episodes count toward ``target_reward`` (Ape-X: the one with the
    smallest ε); None: every slot's.
``priorities(model, batch, cfg) -> torch.Tensor``
    the initial |δ| of an actor's transitions, computed at the edge.
``initial_state(cfg) -> dict``; ``train(model, optimizer, batches, cfg, state)
-> (stats, state, priorities)``
    one learner invocation: a gradient step per batch (``publish_every`` of them), each with
    its importance ``weights``; returns the new |δ| of every row, in order.

A transition (:data:`TRANSITION_KEYS`) is (s_t, a_t, R_t^(n), s_{t+n}, γ^m or 0 at an episode
end, the actor's |δ|): the actor builds n-step transitions (:mod:`faasrl.rl.explore`).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, Field, model_validator

from faasrl.rl.frames import FRAME_ID, FRAMES_PER_TRANSITION, is_stacked_frames
from faasrl.user_input import STRICT

# A transition blob's keys, as actors write them and the buffer stores them.
TRANSITION_KEYS = ("obs", "actions", "returns", "next_obs", "discounts", "priorities")
# What a sampled batch adds: importance weights, and the slots and generations a priority
# update names.
SAMPLE_KEYS = ("weights", "slots", "generations")


class ReplayConfig(BaseModel):
    """The replay buffer's and the learner's cadence: shared by every off-policy Config."""

    model_config = STRICT

    learning_rate: float = Field(1e-4, gt=0, le=1)
    anneal_lr: bool = False
    gamma: float = Field(0.99, gt=0, le=1)
    n_step: int = Field(3, ge=1, le=100, description="steps summed into one transition")
    batch_size: int = Field(512, ge=1, le=65_536)
    memory_size: int = Field(65_536, ge=1, le=10_000_000,
                             description="transitions the buffer function holds")
    learning_starts: int = Field(1_000, ge=1, description="transitions before learning")
    steps_per_round: int = Field(256, ge=1, le=1_000_000,
                                 description="gradient steps per metrics round (whole learner "
                                             "calls)")
    publish_every: int = Field(16, ge=1, le=1024,
                               description="gradient steps per learner invocation, each "
                                           "ending in a publish (N_update)")
    updates_per_step: float = Field(0.25, gt=0, le=64,
                                    description="gradient steps per env step (replay ratio): "
                                                "actors and learner wait to keep it")
    alpha: float = Field(0.6, ge=0, le=1, description="prioritization; 0 = uniform replay")
    beta: float = Field(0.4, ge=0, le=1, description="initial IS exponent, annealed to 1")
    beta_steps: int = Field(100_000, ge=1, description="gradient steps to anneal β to 1")
    priority_epsilon: float = Field(1e-6, gt=0, description="priority floor")
    snapshot_every: int = Field(10_000, ge=1, description="inserts between buffer snapshots")
    snapshot_s: float = Field(30.0, gt=0, description="seconds between buffer snapshots")

    @model_validator(mode="after")
    def _fits(self) -> ReplayConfig:
        if self.batch_size > self.memory_size:
            raise ValueError(f"batch_size ({self.batch_size}) must not exceed memory_size "
                             f"({self.memory_size})")
        if self.learning_starts > self.memory_size:
            raise ValueError(f"learning_starts ({self.learning_starts}) must not exceed "
                             f"memory_size ({self.memory_size})")
        return self


def transition_layout(obs_shape: tuple[int, ...], obs_dtype: str, action_shape: tuple[int, ...],
                      action_dtype: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Per :data:`TRANSITION_KEYS` key, its dtype and shape after the row axis."""
    scalar = ("float32", ())
    return {"obs": (obs_dtype, obs_shape), "actions": (action_dtype, action_shape),
            "returns": scalar, "next_obs": (obs_dtype, obs_shape), "discounts": scalar,
            "priorities": scalar}


def transition_bytes(layout: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """One transition's bytes as an actor ships it (uint8 frames: a byte a pixel; obs and
    next_obs each a whole stack)."""
    return sum(np.dtype(dtype).itemsize * math.prod(shape) for dtype, shape in layout.values())


def stored_transition_bytes(layout: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """The most one transition takes in a replay memory: stacked frames are frame ids, and
    the distinct frames behind them (:mod:`faasrl.rl.frames`) are at most
    ``FRAMES_PER_TRANSITION`` a transition."""
    stacked = {k: shape for k, (dtype, shape) in layout.items() if is_stacked_frames(dtype, shape)}
    slot = sum(FRAME_ID.itemsize * shape[0] if k in stacked else
               np.dtype(dtype).itemsize * math.prod(shape)
               for k, (dtype, shape) in layout.items())
    frame = max((math.prod(shape[1:]) for shape in stacked.values()), default=0)
    return slot + FRAMES_PER_TRANSITION * frame


PROCESS_MB = 512  # a buffer function's own footprint: the runtime, numpy, torch
SNAPSHOT_COPIES = 3  # the memory, plus the arrays and the blob a snapshot encodes


def replay_memory_mb(memory_size: int, bytes_per_transition: int) -> int:
    """MiB a buffer function needs for ``memory_size`` transitions, snapshots included."""
    return PROCESS_MB + math.ceil(SNAPSHOT_COPIES * memory_size * bytes_per_transition / 2**20)


def annealed_beta(cfg: ReplayConfig, steps: int) -> float:
    """β after ``steps`` gradient steps: linear from ``cfg.beta`` to 1."""
    return min(1.0, cfg.beta + (1.0 - cfg.beta) * steps / cfg.beta_steps)
