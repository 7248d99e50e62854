"""The actor's n-step transitions, built from real (tiny, registered) gymnasium envs: sums,
bootstrap discounts, episode ends and time limits, and steps carried across calls."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from faasrl.rl.envs import make_vec_env
from faasrl.rl.explore import Explorer


class _Counter(gym.Env):
    """Step t (from 1) pays reward t and observes t; terminates after ``length`` steps when
    ``length`` is set."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int | None = None):
        self.length, self.t = length, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.length is not None and self.t >= self.length
        return np.full(1, self.t, np.float32), float(self.t), done, False, {}


gym.register("faasrl-test/Counter-v0", entry_point=_Counter, kwargs={"length": 4})
gym.register("faasrl-test/CounterLimit-v0", entry_point=_Counter, max_episode_steps=4)
GAMMA = 0.5


def _explore(env_id: str, steps: int, n: int = 2) -> list[dict[str, np.ndarray]]:
    explorer = Explorer(make_vec_env(env_id, 1, seed=0, gamma=GAMMA, normalize_reward=False),
                        n_step=n, gamma=GAMMA)
    out = []
    for _ in range(2):  # two calls: a transition's steps may straddle them
        transitions, _ = explorer.collect(lambda obs: np.zeros(len(obs), np.int64), steps)
        out.append(transitions.arrays("float32", "int64"))
    return out


def test_n_step_transitions_sum_discounted_rewards_and_cut_at_the_episode_end():
    first, second = _explore("faasrl-test/Counter-v0", steps=3)
    # Call 1: steps 1-3; step 3's 2-step window needs step 4, which the next call brings.
    assert first["obs"][:, 0].tolist() == [0, 1]
    assert first["returns"].tolist() == [1 + GAMMA * 2, 2 + GAMMA * 3]
    assert first["next_obs"][:, 0].tolist() == [2, 3]
    assert first["discounts"].tolist() == [GAMMA ** 2] * 2
    # Call 2: step 4 ends the episode (terminated): steps 3 and 4 flush with discount 0,
    # then the new episode's steps 1-2 (its first transition completes on step 2).
    assert second["obs"][:, 0].tolist() == [2, 3, 0]
    assert second["returns"].tolist() == pytest.approx([3 + GAMMA * 4, 4, 1 + GAMMA * 2])
    assert second["discounts"].tolist() == [0.0, 0.0, GAMMA ** 2]


def test_a_time_limit_bootstraps_from_the_final_observation():
    first, second = _explore("faasrl-test/CounterLimit-v0", steps=4, n=3)
    # Step 4 hits the 4-step limit (truncated): steps 2, 3, 4 flush bootstrapping from the
    # final observation (4), discounted by γ^m for the m steps each one summed.
    assert first["obs"][:, 0].tolist() == [0, 1, 2, 3]
    assert first["returns"].tolist() == pytest.approx(
        [1 + GAMMA * 2 + GAMMA ** 2 * 3, 2 + GAMMA * 3 + GAMMA ** 2 * 4, 3 + GAMMA * 4, 4])
    assert first["next_obs"][:, 0].tolist() == [3, 4, 4, 4]
    assert first["discounts"].tolist() == [GAMMA ** 3, GAMMA ** 3, GAMMA ** 2, GAMMA]
    assert len(second["returns"]) == 4  # the next episode, the same way
