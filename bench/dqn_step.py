"""DQN time per gradient step, faasrl against Stable-Baselines3, in one process.

Same network widths (an MLP of two 256-wide ReLU layers over CartPole's 4 numbers; faasrl's
head is dueling: a value and an advantage layer on that trunk), same batch (64), same optimizer
(Adam, faasrl's learning rate and ε), same gradient clipping (40), one torch thread each (the
learner function's default). Both replay memories hold the same 10,000 random-play CartPole
transitions. A unit is one faasrl learner call's worth of gradient steps (``publish_every``,
8 in CartPole's defaults); the sides alternate unit blocks, their order flipped every
repetition, so a change in the machine's load hits all of them.

What each side's time includes:

- ``faasrl``: what its buffer and learner functions compute for those steps, less the data
  plane: the prioritized draw of all the call's batches (sum tree, importance weights), the
  batches made tensors, :func:`faasrl.algorithms.dqn.train` (double-DQN targets, IS-weighted
  Huber loss, backward, clipping, Adam, the target sync every ``target_update`` steps, the
  new |δ|), and the new priorities applied to the sum tree.
- ``faasrl learner only``: :func:`~faasrl.algorithms.dqn.train` on batches already tensors.
- ``SB3``: ``DQN.train(gradient_steps, batch_size)``: uniform draws, its forward, target,
  loss, backward, clipping and Adam (its target sync runs outside ``train``, every
  ``target_update_interval`` env steps, and is not timed; faasrl's, once per 500 steps, is).
- ``SB3, fused Adam``: the same, with torch's fused Adam, which faasrl's learner uses (the
  same Adam in one pass per parameter; SB3's default loops over the parameters on a CPU,
  seven tensor ops each): what SB3 would take with faasrl's optimizer implementation.

faasrl computes more per step than SB3's vanilla DQN: double DQN adds a forward pass of the
online network over the next observations (three forwards a step where SB3 does two), the
dueling head a layer. The data plane, which SB3 has no counterpart of, is timed apart per
gradient step and never added to the ratio: a call's sample blob encoded (buffer) and decoded
(learner), its new priorities the other way, and the publish (online and target weights as
one safetensors blob); in a job a Redis round trip per blob comes on top.

Time is the process's CPU time (one thread each: other processes on the machine slow the
wall clock of whichever side they happen to preempt); wall time is reported too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from stable_baselines3 import DQN

from faasrl.algorithms import dqn
from faasrl.algorithms.offpolicy import SAMPLE_KEYS, TRANSITION_KEYS
from faasrl.data.codec import decode_arrays, encode_arrays, encode_tensors
from faasrl.rl.policy import policy_spec_for
from faasrl.rl.replay import ReplayMemory

ENV_ID = "CartPole-v1"
TRANSITIONS = 10_000
BETA = 0.4


@dataclass
class Side:
    """One contender: ``block(units)`` runs ``units`` learner calls' worth of gradient steps."""

    name: str
    block: Callable[[int], None]
    cpu: list[float]
    wall: list[float]


def random_play(steps: int, gamma: float, seed: int) -> dict[str, np.ndarray]:
    """CartPole transitions of a random policy, as faasrl's memory holds them (1-step)."""
    env, rng = gym.make(ENV_ID), np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows: dict[str, list[Any]] = {k: [] for k in TRANSITION_KEYS}
    for _ in range(steps):
        action = int(rng.integers(2))
        nxt, reward, terminated, truncated, _ = env.step(action)
        for key, value in zip(TRANSITION_KEYS, (obs, action, reward, nxt,
                                                0.0 if terminated else gamma, rng.random()),
                              strict=True):
            rows[key].append(value)
        obs = env.reset()[0] if terminated or truncated else nxt
    dtypes = {"obs": np.float32, "actions": np.int64, "next_obs": np.float32}
    return {k: np.asarray(v, dtype=dtypes.get(k, np.float32)) for k, v in rows.items()}


class FaasrlStep:
    """faasrl's DQN learner on CartPole's defaults, with the buffer function's memory."""

    def __init__(self, seed: int):
        self.cfg = dqn.Config(**dqn.FAMILY_DEFAULTS["classic"]["hyperparameters"])
        torch.manual_seed(seed)
        self.model = dqn.make_model(policy_spec_for(ENV_ID), self.cfg)
        self.optimizer = dqn.make_optimizer(self.model, self.cfg)
        self.state = dqn.initial_state(self.cfg)
        self.rng = np.random.default_rng(seed)
        self.memory = ReplayMemory(self.cfg.memory_size, alpha=self.cfg.alpha,
                                   epsilon=self.cfg.priority_epsilon)
        data = random_play(TRANSITIONS, self.cfg.gamma, seed)
        self.memory.add(data, priorities=data["priorities"])
        self.steps = self.cfg.publish_every
        self.drawn = self._draw()
        self.fixed = self._batches(self.drawn)

    def _draw(self) -> dict[str, np.ndarray]:
        """The buffer's sample mode: every batch of the call drawn at once, with the
        importance weights and the slots a priority update names."""
        drawn = self.memory.sample(self.steps * self.cfg.batch_size, BETA, self.rng)
        arrays = {k: v for k, v in drawn.arrays.items() if k != "priorities"}
        arrays.update(zip(SAMPLE_KEYS, (drawn.weights, drawn.slots, drawn.generations),
                          strict=True))
        return arrays

    def _batches(self, arrays: dict[str, np.ndarray]) -> list[dict[str, torch.Tensor]]:
        """The learner's train mode, up to the gradient steps: the rows as batches."""
        data = {k: torch.as_tensor(v) for k, v in arrays.items() if k not in SAMPLE_KEYS[1:]}
        size = self.cfg.batch_size
        return [{k: v[i:i + size] for k, v in data.items()}
                for i in range(0, len(arrays["slots"]), size)]

    def _train(self, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        _, self.state, new = dqn.train(self.model, self.optimizer, batches, self.cfg, self.state)
        return new

    def whole(self) -> None:
        """Draw, train, and the new priorities back into the sum tree."""
        arrays = self._draw()
        new = self._train(self._batches(arrays))
        self.memory.update_priorities(arrays["slots"], arrays["generations"], new.numpy())

    def learner_only(self) -> None:
        self._train(self.fixed)

    def data_plane(self) -> None:
        """What a call moves through Redis, less Redis: the sample blob (encoded by the
        buffer, decoded by the learner), the new priorities (back the other way) and the
        published weights."""
        decode_arrays(encode_arrays(self.drawn))
        slots = {k: self.drawn[k] for k in SAMPLE_KEYS[1:]}
        decode_arrays(encode_arrays({**slots, "priorities": self.drawn["weights"]}))
        encode_tensors(self.model.state_dict())


def sb3_model(faasrl: FaasrlStep, seed: int, fused: bool) -> DQN:
    """SB3's DQN with faasrl's network widths, batch, optimizer and clipping, its buffer
    filled by random play (``learning_starts`` past the fill: no gradient step yet)."""
    cfg = faasrl.cfg
    optimizer = {"eps": cfg.adam_eps, **({"fused": True} if fused else {})}
    model = DQN("MlpPolicy", gym.make(ENV_ID), learning_rate=cfg.learning_rate,
                batch_size=cfg.batch_size, buffer_size=cfg.memory_size,
                learning_starts=TRANSITIONS + 1, gamma=cfg.gamma,
                max_grad_norm=cfg.max_grad_norm, seed=seed, device="cpu",
                policy_kwargs={"net_arch": list(cfg.model.hidden),
                               "optimizer_kwargs": optimizer})
    model.learn(total_timesteps=TRANSITIONS)
    return model


def _calls(call: Callable[[], None]) -> Callable[[int], None]:
    def block(units: int) -> None:
        for _ in range(units):
            call()
    return block


def _time(side: Side, units: int) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    side.block(units)
    side.cpu.append(time.process_time() - cpu)
    side.wall.append(time.perf_counter() - wall)


def _summary(side: Side, steps: int) -> dict[str, Any]:
    per_step = [1e6 * t / steps for t in side.cpu]
    return {"cpu_us_median": statistics.median(per_step), "cpu_us_min": min(per_step),
            "cpu_us_max": max(per_step),
            "wall_us_median": statistics.median(1e6 * t / steps for t in side.wall)}


def compare_steps(console: Console, *, repetitions: int, units: int, seed: int = 1
                  ) -> dict[str, Any]:
    """faasrl ÷ SB3 time per gradient step (medians of ``repetitions`` blocks of ``units``
    learner calls per side)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compare(console, repetitions, units, seed)
    finally:
        torch.set_num_threads(threads)


def _compare(console: Console, repetitions: int, units: int, seed: int) -> dict[str, Any]:
    faasrl = FaasrlStep(seed)
    sb3 = sb3_model(faasrl, seed, fused=False)
    sb3_fused = sb3_model(faasrl, seed, fused=True)
    steps, size = faasrl.steps, faasrl.cfg.batch_size
    # SB3 takes a block's steps in one train() call (its per-call costs spread thinner than
    # faasrl's, whose learner calls take publish_every steps each).
    sides = [Side("faasrl", _calls(faasrl.whole), [], []),
             Side("faasrl learner only", _calls(faasrl.learner_only), [], []),
             Side("SB3", lambda units: sb3.train(units * steps, size), [], []),
             Side("SB3, fused Adam", lambda units: sb3_fused.train(units * steps, size),
                  [], []),
             Side("faasrl data plane (not in the ratio)", _calls(faasrl.data_plane), [], [])]
    for side in sides:  # warm: first calls allocate
        side.block(2)
    for rep in range(repetitions):
        for side in sides if rep % 2 == 0 else reversed(sides):
            _time(side, units)
    per_block = units * steps
    out = {side.name: _summary(side, per_block) for side in sides}
    base = out["SB3"]["cpu_us_median"]
    paired = [f / s for f, s in zip(sides[0].cpu, sides[2].cpu, strict=True)]
    summary = {"repetitions": repetitions, "gradient_steps_per_block": per_block,
               "batch_size": size, "hidden": list(faasrl.cfg.model.hidden),
               "sides": out, "faasrl_over_sb3": out["faasrl"]["cpu_us_median"] / base,
               "faasrl_over_sb3_paired": {"median": statistics.median(paired),
                                          "min": min(paired), "max": max(paired)},
               "learner_only_over_sb3": out["faasrl learner only"]["cpu_us_median"] / base,
               "faasrl_over_sb3_fused":
                   out["faasrl"]["cpu_us_median"] / out["SB3, fused Adam"]["cpu_us_median"],
               "wall_faasrl_over_sb3":
                   out["faasrl"]["wall_us_median"] / out["SB3"]["wall_us_median"]}
    table = Table("side", "CPU µs / step, median", "spread (min-max)", "wall µs / step",
                  "÷ SB3 (CPU)", title=f"DQN {ENV_ID} time per gradient step (batch {size}, "
                  f"MLP {faasrl.cfg.model.hidden}, {repetitions} alternating blocks of "
                  f"{per_block} steps)")
    for name, s in out.items():
        table.add_row(name, f"{s['cpu_us_median']:,.0f}",
                      f"{s['cpu_us_min']:,.0f}-{s['cpu_us_max']:,.0f}",
                      f"{s['wall_us_median']:,.0f}", f"{s['cpu_us_median'] / base:.2f}x")
    console.print(table)
    p = summary["faasrl_over_sb3_paired"]
    console.print(f"faasrl / SB3 per gradient step: {summary['faasrl_over_sb3']:.2f}x CPU "
                  f"(paired blocks: median {p['median']:.2f}x, {p['min']:.2f}-{p['max']:.2f}), "
                  f"{summary['wall_faasrl_over_sb3']:.2f}x wall; the data plane is not in "
                  "the ratio")
    return summary
