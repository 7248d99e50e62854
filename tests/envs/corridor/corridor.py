"""A 1-D corridor: walk right from cell 0 to the goal at the far end.

Actions: 0 left, 1 right (``Discrete(2)``); the observation is the position in [0, 1]. Reaching
the goal ends the episode with reward 1; every other step costs 0.01. Importing the module
registers it as ``MyCorridor-v0``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 8):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.position / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.position = min(max(self.position + (1 if int(action) == 1 else -1), 0),
                            self.length - 1)
        done = self.position == self.length - 1
        return self._obs(), 1.0 if done else -0.01, done, False, {}


gym.register("MyCorridor-v0", entry_point=Corridor, max_episode_steps=50)
