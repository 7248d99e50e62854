"""Envs that go wrong in each way the platform must survive, and spaces it must take or refuse:
each a corridor with one thing changed."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from corridor import Corridor


class RaisesAtReset(Corridor):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        raise RuntimeError("RaisesAtReset: no reset today")


class RaisesMidStep(Corridor):
    """Fails on the ``after``-th step of its life."""

    def __init__(self, after: int = 5, **kw: Any):
        super().__init__(**kw)
        self.after, self.steps = after, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps >= self.after:
            raise ValueError(f"RaisesMidStep: step {self.steps} went wrong")
        return super().step(action)


class LoopsInReset(Corridor):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        while True:
            time.sleep(0.01)


class EatsMemory(Corridor):
    """Asks for 8 GiB at reset, 64 MiB at a time (calloc'd, never touched: harmless where no
    limit holds it, a MemoryError where one does)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        hoard = [bytes(64 << 20) for _ in range(128)]
        return super().reset(seed=seed), hoard


class DictObs(Corridor):
    """The position and a flag, as a Dict observation."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
            "at_start": gym.spaces.Discrete(2)})

    def _obs(self) -> Any:
        return {"position": super()._obs(), "at_start": int(self.position == 0)}


class Frames(Corridor):
    """The corridor drawn as a 48x48 RGB frame (channels last): column = position."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.observation_space = gym.spaces.Box(0, 255, (48, 48, 3), np.uint8)

    def _obs(self) -> Any:
        frame = np.zeros((48, 48, 3), dtype=np.uint8)
        frame[:, self.position * 48 // self.length, 0] = 255
        return frame


class MultiDiscreteAction(Corridor):
    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.action_space = gym.spaces.MultiDiscrete([2, 2])


def not_an_env() -> str:
    return "a string"
