"""Environment construction: one place that knows how each env family is wrapped for training.

Every env is seeded and reset once here (sub-env ``i`` with ``seed + i``), so the caller gets
ready envs whose randomness depends on ``seed`` alone; later ``reset()`` calls without a seed
continue those seeded streams, which is what :class:`~faasrl.rl.rollout.Rollout` does.
"""

from __future__ import annotations

import difflib
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

gym.register_envs(ale_py)  # importing ale_py registers the ALE/ ids; this makes the use explicit


def env_family(env_id: str) -> str:
    """``"classic"``, ``"mujoco"``, ``"atari"`` or ``"other"`` (also for unregistered ids)."""
    if env_id.startswith("ALE/"):
        return "atari"
    spec = gym.registry.get(env_id)
    if spec is None:
        return "other"
    entry = spec.entry_point
    if not isinstance(entry, str):
        entry = f"{entry.__module__}:{entry.__qualname__}"
    if entry.startswith("gymnasium.envs.classic_control"):
        return "classic"
    if entry.startswith("gymnasium.envs.mujoco"):
        return "mujoco"
    return "other"


def check_env_id(env_id: str) -> None:
    """Fail fast, before any env is built, on ids gymnasium does not know; suggest near misses."""
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"unknown gymnasium environment id {env_id!r}{hint}")


# Atari's preprocessing, as gymnasium.make's arguments and gymnasium.wrappers (name, arguments)
# applied in order: _build applies them, and model files name them (env_preprocessing).
ATARI_MAKE_KWARGS: dict[str, Any] = {"frameskip": 1}
ATARI_WRAPPERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("AtariPreprocessing", {"noop_max": 30, "frame_skip": 4, "screen_size": 84,
                            "grayscale_obs": True, "terminal_on_life_loss": False}),
    ("FrameStackObservation", {"stack_size": 4}),
)
CLIP_ACTION = ("ClipAction", {})  # outermost, for Box actions: Gaussian policies sample unbounded


def _make_kwargs(env_id: str) -> dict[str, Any]:
    return dict(ATARI_MAKE_KWARGS) if env_family(env_id) == "atari" else {}


def _wrappers(env_id: str, continuous_actions: bool) -> list[tuple[str, dict[str, Any]]]:
    wrappers = [*ATARI_WRAPPERS] if env_family(env_id) == "atari" else []
    return [*wrappers, CLIP_ACTION] if continuous_actions else wrappers


def _build(env_id: str) -> gym.Env:
    """One unseeded env with the observation/action preprocessing shared by training and eval."""
    env = gym.make(env_id, **_make_kwargs(env_id))
    # Innermost, so episode returns and lengths are raw (for Atari, lengths count emulator frames).
    env = gym.wrappers.RecordEpisodeStatistics(env)
    for name, kwargs in _wrappers(env_id, isinstance(env.action_space, gym.spaces.Box)):
        env = getattr(gym.wrappers, name)(env, **kwargs)
    return env


def env_preprocessing(env_id: str, continuous_actions: bool) -> dict[str, Any]:
    """What :func:`_build` does to ``env_id``, as data: ``gymnasium.make(id, **make_kwargs)``,
    then each of ``wrappers`` (a ``gymnasium.wrappers`` name and its arguments) in order.
    Leaves out RecordEpisodeStatistics, which only records."""
    return {"id": env_id, "make_kwargs": _make_kwargs(env_id),
            "wrappers": [{"name": name, "kwargs": kwargs}
                         for name, kwargs in _wrappers(env_id, continuous_actions)]}


def _build_train(env_id: str, gamma: float, normalize_reward: bool | None) -> gym.Env:
    """:func:`_build` plus reward shaping: it helps learning but must never reach evaluation."""
    family = env_family(env_id)
    env = _build(env_id)
    if family == "atari":
        env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))
    if family == "mujoco" if normalize_reward is None else normalize_reward:
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.ClipReward(env, -10.0, 10.0)
    return env


def make_vec_env(
    env_id: str,
    num_envs: int,
    seed: int,
    *,
    gamma: float = 0.99,
    normalize_reward: bool | None = None,
) -> VectorEnv:
    """Training envs, already reset with ``seed`` (sub-env ``i`` gets ``seed + i``).

    Same-step autoreset, so ``infos["final_obs"]`` holds the last observation of an episode that
    ended on this step (needed to bootstrap truncated episodes). Rewards may be clipped (Atari) or
    normalised (``normalize_reward``; ``None`` means on for MuJoCo only); ``infos["episode"]``
    statistics stay raw. Observations are not normalised here: the policy does it.
    """
    check_env_id(env_id)
    envs = SyncVectorEnv(
        [lambda: _build_train(env_id, gamma, normalize_reward) for _ in range(num_envs)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    return envs


def obs_dtype(space: gym.spaces.Box) -> str:
    """How observations travel and are stored: uint8 frames stay uint8, the rest float32
    (MuJoCo's float64 is cast: plenty, and half the traffic)."""
    return "uint8" if space.dtype == np.uint8 else "float32"


def make_env(env_id: str) -> gym.Env:
    """One evaluation env, not reset yet (an episode resets it with its own seed): training
    observations, raw rewards."""
    check_env_id(env_id)
    return _build(env_id)


Ended = tuple[int, Any, dict[str, Any]]  # an episode that ended: (env index, final obs, info)


def step_envs(envs: SyncVectorEnv, actions: np.ndarray, rewards: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Ended]]:
    """One step of every env of ``envs`` (as :func:`make_vec_env` builds them), with its
    same-step autoreset done here: an env whose episode ended is reset at once, unseeded (its
    stream goes on). ``SyncVectorEnv.step`` does the same and batches spaces and infos on top,
    which cost CartPole as much as its envs' own steps. The rewards go to ``rewards``; returns
    the next observations (a new array), the terminated and truncated flags and the episodes
    that ended."""
    if envs.autoreset_mode != AutoresetMode.SAME_STEP:
        raise ValueError("step_envs steps envs with same-step autoreset (make_vec_env's)")
    n, space = envs.num_envs, envs.single_observation_space
    next_obs = np.empty((n, *space.shape), dtype=space.dtype)
    terminated, truncated = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    ended: list[Ended] = []
    for i, env in enumerate(envs.envs):
        obs, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
        if terminated[i] or truncated[i]:
            ended.append((i, obs, info))
            obs, _ = env.reset()
        next_obs[i] = obs
    return next_obs, terminated, truncated, ended


def episodes_of(ended: list[Ended]) -> list[tuple[float, int]]:
    """(raw return, length) of the episodes that ended (``RecordEpisodeStatistics``'s)."""
    return [(float(info["episode"]["r"]), int(info["episode"]["l"]))
            for _, _, info in ended if "episode" in info]
