"""Training envs stepped by EnvPool (C++, batched), with the gymnasium path's semantics.

:class:`EnvPoolEnvs` is what :func:`~faasrl.rl.envs.make_vec_env` returns for the ``envpool``
backend: its EnvPool is made with the options that reproduce :mod:`faasrl.rl.envs`'
preprocessing (Atari's from ``ATARI_WRAPPERS`` and the gymnasium id's own arguments), and its
:meth:`~EnvPoolEnvs.step_envs` does what :func:`~faasrl.rl.envs.step_envs` does: same-step
autoreset (EnvPool resets an ended env on the *next* step; here it is reset at once), raw episode
statistics, actions clipped, rewards shaped as training shapes them (Atari's sign, MuJoCo's
normalised return per env). ``docs/env-backends.md`` lists what still differs.
"""

from __future__ import annotations

from typing import Any

import envpool
import gymnasium as gym
import numpy as np

from faasrl.rl.env_backends import envpool_id
from faasrl.rl.envs import ATARI_WRAPPERS, Ended, env_family

THREADS = 1  # an actor is given one core: EnvPool's worker threads would only contend for it
REWARD_CLIP = 10.0  # ClipReward's bound after NormalizeReward (envs._build_train)


def envpool_options(env_id: str) -> dict[str, Any]:
    """``envpool.make``'s arguments that give ``env_id`` the platform's preprocessing."""
    spec = gym.spec(env_id)
    if env_family(env_id) != "atari":
        return {"max_episode_steps": spec.max_episode_steps}
    wrappers = dict(ATARI_WRAPPERS)
    pre, stack = wrappers["AtariPreprocessing"], wrappers["FrameStackObservation"]
    return {
        "noop_max": pre["noop_max"], "frame_skip": pre["frame_skip"],
        "img_height": pre["screen_size"], "img_width": pre["screen_size"],
        "gray_scale": pre["grayscale_obs"], "episodic_life": pre["terminal_on_life_loss"],
        "stack_num": stack["stack_size"],
        "repeat_action_probability": spec.kwargs["repeat_action_probability"],
        "full_action_space": spec.kwargs["full_action_space"],
        # ALE's limit counts emulator frames; EnvPool's, agent steps.
        "max_episode_steps": spec.kwargs["max_num_frames_per_episode"] // pre["frame_skip"],
        "use_inter_area_resize": True,  # cv2.INTER_AREA, as AtariPreprocessing resizes
        "use_fire_reset": False, "reward_clip": False, "zero_discount_on_life_loss": False,
    }


def make_pool(env_id: str, num_envs: int, seed: int, **overrides: Any) -> Any:
    """An EnvPool of ``num_envs`` envs, env ``i`` seeded with ``seed + i`` (EnvPool's rule)."""
    pool_id = envpool_id(env_id)
    if pool_id is None:
        raise ValueError(f"envpool cannot run {env_id!r} with the platform's semantics")
    return envpool.make(pool_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs,
                        num_threads=THREADS, seed=seed,
                        **(envpool_options(env_id) | overrides))


class RewardNormalizer:
    """gymnasium's ``NormalizeReward`` then ``ClipReward``, one per env as each gymnasium env
    wraps its own, vectorised: each env's discounted return (zeroed on termination) and its
    running variance (Welford, one sample a step, count starting at 1e-4)."""

    def __init__(self, num_envs: int, gamma: float, epsilon: float = 1e-8):
        self.gamma, self.epsilon = gamma, epsilon
        self.discounted = np.zeros(num_envs)
        self.mean, self.var = np.zeros(num_envs), np.ones(num_envs)
        self.count = np.full(num_envs, 1e-4)

    def __call__(self, reward: np.ndarray, terminated: np.ndarray) -> np.ndarray:
        self.discounted = self.discounted * self.gamma * (1 - terminated) + reward
        delta, total = self.discounted - self.mean, self.count + 1
        self.mean = self.mean + delta / total
        self.var = (self.var * self.count + delta**2 * self.count / total) / total
        self.count = total
        return np.clip(reward / np.sqrt(self.var + self.epsilon), -REWARD_CLIP, REWARD_CLIP)


class EnvPoolEnvs:
    """``num_envs`` training envs of ``env_id`` in one EnvPool, stepped as
    :func:`~faasrl.rl.envs.step_envs` steps gymnasium's (the vector env API that
    :class:`~faasrl.rl.rollout.Rollout` and :class:`~faasrl.rl.explore.Explorer` use)."""

    backend = "envpool"

    def __init__(self, env_id: str, num_envs: int, seed: int, *, gamma: float,
                 normalize_reward: bool | None):
        family = env_family(env_id)
        self.pool = make_pool(env_id, num_envs, seed)
        self.num_envs = num_envs
        self.single_observation_space = self.pool.observation_space
        self.single_action_space = self.pool.action_space
        self._sign = family == "atari"
        # Episode lengths count emulator frames for Atari, as RecordEpisodeStatistics does
        # inside AtariPreprocessing (less the reset's no-ops, which EnvPool does not count).
        self._frames = envpool_options(env_id)["frame_skip"] if self._sign else 1
        normalize = family == "mujoco" if normalize_reward is None else normalize_reward
        self._normalize = RewardNormalizer(num_envs, gamma) if normalize else None
        space = self.single_action_space
        self._bounds = (space.low, space.high) if isinstance(space, gym.spaces.Box) else None
        self._returns, self._lengths = np.zeros(num_envs), np.zeros(num_envs, dtype=np.int64)
        self._order = np.arange(num_envs, dtype=np.int32)

    def reset(self) -> tuple[np.ndarray, dict[str, Any]]:
        """Every env starts a new episode (its seeded stream goes on)."""
        obs, info = self.pool.reset()
        self._returns[:], self._lengths[:] = 0.0, 0
        return self._ordered(obs, info), {}

    def _ordered(self, obs: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        """``obs`` in env order (a synchronous pool answers in it; this makes sure)."""
        ids = info["env_id"]
        if np.array_equal(ids, self._order[:len(ids)]):
            return obs
        out = np.empty_like(obs)
        out[np.argsort(ids)] = obs
        return out

    def step_envs(self, actions: np.ndarray, rewards: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Ended]]:
        """One step of every env, an ended one reset at once: as
        :func:`~faasrl.rl.envs.step_envs` (its shaped rewards go to ``rewards``)."""
        if self._bounds is not None:
            actions = np.clip(actions, *self._bounds)
        obs, reward, terminated, truncated, info = self.pool.step(actions)
        if not np.array_equal(info["env_id"], self._order):
            index = np.argsort(info["env_id"])
            obs, reward = obs[index], reward[index]
            terminated, truncated = terminated[index], truncated[index]
        raw = np.asarray(reward, dtype=np.float64)
        self._returns += raw
        self._lengths += 1
        shaped = np.sign(raw) if self._sign else raw
        if self._normalize is not None:
            shaped = self._normalize(shaped, terminated)
        rewards[:] = shaped
        done = terminated | truncated
        ended: list[Ended] = []
        if done.any():
            index = np.flatnonzero(done)
            obs = np.array(obs)  # the reset observations go in below
            ended = [(int(i), obs[i].copy(),
                      {"episode": {"r": self._returns[i], "l": self._lengths[i] * self._frames}})
                     for i in index]
            self._returns[index], self._lengths[index] = 0.0, 0
            fresh, fresh_info = self.pool.reset(index.astype(np.int32))
            obs[fresh_info["env_id"]] = fresh
        return obs, np.asarray(terminated, bool), np.asarray(truncated, bool), ended

    def close(self) -> None:
        self.pool.close()
