"""A 1-D corridor: walk right to its end.

The agent starts in cell 0 of ``length`` cells; action 1 steps right, 0 left (a wall at 0).
Reaching the last cell ends the episode (terminated) with reward 1; every other step costs
0.01. The observation is the position scaled to [0, 1]. A random walk rarely reaches the end
within 50 steps; always stepping right scores ``1 - 0.01 * (length - 2)``.

Importing this module also registers it as ``MyCorridor-v0`` (50 steps per episode), for jobs
that name it by id (``env: {imports: [corridor]}``, ``env_id: MyCorridor-v0``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "MyCorridor-v0"


class Corridor(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, length: int = 8):
        if length < 2:
            raise ValueError("a corridor has at least 2 cells")
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._pos = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._pos / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._pos = max(0, self._pos + (1 if int(action) == 1 else -1))
        done = self._pos == self.length - 1
        return self._obs(), 1.0 if done else -0.01, done, False, {}


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=Corridor, max_episode_steps=50)
