"""Environment construction: one place that knows how each env family is wrapped for training.

Every env is seeded and reset once here (sub-env ``i`` with ``seed + i``), so the caller gets
ready envs whose randomness depends on ``seed`` alone; later ``reset()`` calls without a seed
continue those seeded streams, which is what :class:`~faasrl.rl.rollout.Rollout` does.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from faasrl.env_code import EnvCode, EnvDescription
from faasrl.rl.env_backends import EnvBackend
from faasrl.rl.env_loader import EnvError, env_name, last_lines, make

if TYPE_CHECKING:
    from faasrl.rl.envpool_envs import EnvPoolEnvs

gym.register_envs(ale_py)  # importing ale_py registers the ALE/ ids; this makes the use explicit


def env_family(env_id: str, env: EnvCode | None = None) -> str:
    """``"classic"``, ``"mujoco"``, ``"atari"`` or ``"other"`` (also for unregistered ids and
    for every env brought as code: the CNN is then chosen by the observations' shape)."""
    if env is not None:
        return "other"
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


Wrapper = tuple[str, dict[str, Any]]  # a wrapper's name and its arguments
# Atari's preprocessing, as gymnasium.make's arguments and gymnasium.wrappers (name, arguments)
# applied in order: build applies them, and model files name them (env_preprocessing).
ATARI_MAKE_KWARGS: dict[str, Any] = {"frameskip": 1}
ATARI_WRAPPERS: tuple[Wrapper, ...] = (
    ("AtariPreprocessing", {"noop_max": 30, "frame_skip": 4, "screen_size": 84,
                            "grayscale_obs": True, "terminal_on_life_loss": False}),
    ("FrameStackObservation", {"stack_size": 4}),
)
# Outermost, for Box actions: Gaussian policies sample unbounded.
CLIP_ACTION: Wrapper = ("ClipAction", {})
FLATTEN: Wrapper = ("FlattenObservation", {})  # Dict, Tuple, Discrete, ... observations
CHANNELS_FIRST: Wrapper = ("TransposeObservation", {"axes": [2, 0, 1]})  # HWC frames to CHW
FLATTENED = (gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
             gym.spaces.MultiBinary)
SUPPORTED = ("observations: a Box of any shape, or a Dict, Tuple, Discrete, MultiDiscrete or "
             "MultiBinary (flattened); actions: Discrete(n) or a 1-D Box")


class TransposeObservation(gym.ObservationWrapper):
    """Observations with their axes permuted as ``numpy.transpose(obs, axes)``: channels-last
    frames to the CNN's channels-first (gymnasium has no such wrapper; model files name it
    with its ``axes``)."""

    def __init__(self, env: gym.Env, axes: list[int]):
        super().__init__(env)
        self.axes = tuple(axes)
        space = env.observation_space
        assert isinstance(space, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(np.transpose(space.low, self.axes),
                                                np.transpose(space.high, self.axes),
                                                dtype=space.dtype)

    def observation(self, observation: Any) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(observation, self.axes))


_OWN_WRAPPERS: dict[str, type[gym.Wrapper]] = {"TransposeObservation": TransposeObservation}


def is_frames(space: gym.Space) -> bool:
    """3-D uint8 observations: images, which take the CNN (channels first)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 \
        and space.dtype == np.uint8


def observation_wrappers(space: gym.Space) -> list[Wrapper]:
    """What makes an env's observations a Box the networks take: structured spaces flattened
    (gymnasium's ``FlattenObservation``), channels-last frames (``C <= 4 < H``) transposed."""
    if isinstance(space, FLATTENED):
        return [FLATTEN]
    if is_frames(space) and space.shape[-1] <= 4 < space.shape[0]:
        return [CHANNELS_FIRST]
    return []


def check_spaces(obs_space: gym.Space, action_space: gym.Space) -> None:
    """An :class:`EnvError` (stage ``spaces``) naming a space the algorithms cannot take."""
    if not isinstance(obs_space, (gym.spaces.Box, *FLATTENED)):
        raise EnvError("spaces", f"observation space {obs_space} is not supported; "
                                 f"supported: {SUPPORTED}")
    if isinstance(action_space, gym.spaces.Discrete) and action_space.start == 0:
        return
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1 \
            and np.issubdtype(action_space.dtype, np.floating):
        return
    raise EnvError("spaces", f"action space {action_space} is not supported; "
                             f"supported: {SUPPORTED}")


def _make_kwargs(env_id: str, env: EnvCode | None) -> dict[str, Any]:
    return dict(ATARI_MAKE_KWARGS) if env_family(env_id, env) == "atari" else {}


def _family_wrappers(env_id: str, env: EnvCode | None) -> list[Wrapper]:
    return [*ATARI_WRAPPERS] if env_family(env_id, env) == "atari" else []


def _wrap(env: gym.Env, wrapper: Wrapper) -> gym.Env:
    name, kwargs = wrapper
    return (_OWN_WRAPPERS.get(name) or getattr(gym.wrappers, name))(env, **kwargs)


@dataclass
class Built:
    """An env as :func:`build` made it, and how."""

    env: gym.Env
    wrappers: list[Wrapper]  # the platform's, in the order applied
    obs_space: gym.Space  # the env's own, before them
    action_space: gym.Space  # the env's own (ClipAction widens it to +-inf)


def build(env_id: str, env: EnvCode | None = None, *, render: bool = False) -> Built:
    """One unseeded env with the observation/action preprocessing shared by training and eval;
    ``render``: its ``render()`` returns RGB frames (``render_mode="rgb_array"``)."""
    kwargs = _make_kwargs(env_id, env) | ({"render_mode": "rgb_array"} if render else {})
    made = make(env_id, env, **kwargs)
    # Innermost, so episode returns and lengths are raw (for Atari, lengths count emulator frames).
    made = gym.wrappers.RecordEpisodeStatistics(made)
    wrappers = _family_wrappers(env_id, env)
    for wrapper in wrappers:
        made = _wrap(made, wrapper)
    obs_space, action_space = made.observation_space, made.action_space
    try:
        check_spaces(obs_space, action_space)
    except EnvError as exc:
        made.close()
        raise EnvError(exc.stage, exc.detail, env_name(env_id, env)) from None
    more = observation_wrappers(obs_space)
    more += [CLIP_ACTION] if isinstance(action_space, gym.spaces.Box) else []
    for wrapper in more:
        made = _wrap(made, wrapper)
    return Built(made, [*wrappers, *more], obs_space, action_space)


def env_preprocessing(env_id: str, continuous_actions: bool, env: EnvCode | None = None,
                      wrappers: list[Wrapper] | None = None) -> dict[str, Any]:
    """What :func:`build` does to ``env_id``, as data: ``gymnasium.make(id, **make_kwargs)``
    (an env brought as code: ``code``, its :class:`~faasrl.env_code.EnvCode` less the
    client's folder), then each of ``wrappers`` (a ``gymnasium.wrappers`` name and its
    arguments; ``TransposeObservation`` is :class:`TransposeObservation`) in order. Leaves
    out RecordEpisodeStatistics, which only records. ``wrappers``: those :func:`build`
    applied (the describe probe's); without them, a registered id's, from its family."""
    if wrappers is None:
        wrappers = _family_wrappers(env_id, env) + ([CLIP_ACTION] if continuous_actions else [])
    out = {"id": env_id, "make_kwargs": _make_kwargs(env_id, env),
           "wrappers": [{"name": name, "kwargs": kwargs} for name, kwargs in wrappers]}
    if env is not None:
        out["code"] = env.model_dump(mode="json", exclude={"code_dir"})
    return out


def _build_train(env_id: str, env: EnvCode | None, gamma: float,
                 normalize_reward: bool | None) -> gym.Env:
    """:func:`build` plus reward shaping: it helps learning but must never reach evaluation."""
    family = env_family(env_id, env)
    made = build(env_id, env).env
    if family == "atari":
        made = gym.wrappers.TransformReward(made, lambda r: float(np.sign(r)))
    if family == "mujoco" if normalize_reward is None else normalize_reward:
        made = gym.wrappers.NormalizeReward(made, gamma=gamma)
        made = gym.wrappers.ClipReward(made, -10.0, 10.0)
    return made


def make_vec_env(
    env_id: str,
    num_envs: int,
    seed: int,
    *,
    env: EnvCode | None = None,
    gamma: float = 0.99,
    normalize_reward: bool | None = None,
    backend: EnvBackend = "gymnasium",
) -> VectorEnv | EnvPoolEnvs:
    """Training envs, already reset with ``seed`` (sub-env ``i`` gets ``seed + i``); ``env``:
    the env's code (None: ``env_id`` is registered). ``backend`` ``envpool``: an
    :class:`~faasrl.rl.envpool_envs.EnvPoolEnvs` with the same semantics (an env it supports,
    :func:`~faasrl.rl.env_backends.resolve`), stepped by :func:`step_envs` alike.

    Same-step autoreset, so ``infos["final_obs"]`` holds the last observation of an episode that
    ended on this step (needed to bootstrap truncated episodes). Rewards may be clipped (Atari) or
    normalised (``normalize_reward``; ``None`` means on for MuJoCo only); ``infos["episode"]``
    statistics stay raw. Observations are not normalised here: the policy does it.
    """
    if env is None:
        check_env_id(env_id)
    if backend == "envpool":
        from faasrl.rl.envpool_envs import EnvPoolEnvs  # its import takes 2 s: actors only

        return EnvPoolEnvs(env_id, num_envs, seed, gamma=gamma,
                           normalize_reward=normalize_reward)
    envs = SyncVectorEnv(
        [lambda: _build_train(env_id, env, gamma, normalize_reward) for _ in range(num_envs)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    try:
        envs.reset(seed=seed)
    except Exception as exc:
        envs.close()
        raise EnvError("reset", last_lines(exc), env_name(env_id, env)) from exc
    envs.action_space.seed(seed)
    return envs


def obs_dtype(space: gym.spaces.Box) -> str:
    """How observations travel and are stored: uint8 frames stay uint8, the rest float32
    (MuJoCo's float64 is cast: plenty, and half the traffic)."""
    return "uint8" if space.dtype == np.uint8 else "float32"


def make_env(env_id: str, env: EnvCode | None = None, *, render: bool = False) -> gym.Env:
    """One evaluation env, not reset yet (an episode resets it with its own seed): training
    observations, raw rewards; ``render``: it renders RGB frames, for videos."""
    if env is None:
        check_env_id(env_id)
    return build(env_id, env, render=render).env


def describe(env_id: str, env: EnvCode | None = None) -> EnvDescription:
    """What the env is after the platform's preprocessing: enough to pick the network and
    lay out batches without building it again (the probe adds the env checker's warnings)."""
    if env is None:
        check_env_id(env_id)
    built = build(env_id, env)
    try:
        obs, action = built.env.observation_space, built.action_space
        assert isinstance(obs, gym.spaces.Box)
        if isinstance(action, gym.spaces.Discrete):
            actions: dict[str, Any] = {"action_kind": "discrete", "action_dim": int(action.n)}
        else:
            actions = {"action_kind": "continuous", "action_dim": int(action.shape[0]),
                       "action_low": [float(x) for x in action.low],
                       "action_high": [float(x) for x in action.high]}
        base = built.env.unwrapped
        reward_range = getattr(base, "reward_range", None)
        spec = built.env.spec
        limit = env.max_episode_steps if env is not None and env.entry_point else \
            spec.max_episode_steps if spec is not None else None
        return EnvDescription(
            family=env_family(env_id, env), obs_shape=list(obs.shape), obs_dtype=obs_dtype(obs),
            obs_space=str(built.obs_space), **actions, action_space=str(action),
            reward_range=[float(x) for x in reward_range] if reward_range else None,
            max_episode_steps=limit,
            preprocessing=env_preprocessing(env_id, actions["action_kind"] == "continuous", env,
                                            built.wrappers))
    finally:
        built.env.close()


Ended = tuple[int, Any, dict[str, Any]]  # an episode that ended: (env index, final obs, info)


def step_envs(envs: SyncVectorEnv | EnvPoolEnvs, actions: np.ndarray, rewards: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Ended]]:
    """One step of every env of ``envs`` (as :func:`make_vec_env` builds them), with its
    same-step autoreset done here: an env whose episode ended is reset at once, unseeded (its
    stream goes on). ``SyncVectorEnv.step`` does the same and batches spaces and infos on top,
    which cost CartPole as much as its envs' own steps. The rewards go to ``rewards``; returns
    the next observations (a new array), the terminated and truncated flags and the episodes
    that ended. EnvPool's envs step themselves (:meth:`EnvPoolEnvs.step_envs`)."""
    if not isinstance(envs, SyncVectorEnv):
        return envs.step_envs(actions, rewards)
    if envs.autoreset_mode != AutoresetMode.SAME_STEP:
        raise ValueError("step_envs steps envs with same-step autoreset (make_vec_env's)")
    n, space = envs.num_envs, envs.single_observation_space
    next_obs = np.empty((n, *space.shape), dtype=space.dtype)
    terminated, truncated = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    ended: list[Ended] = []
    stage = "step"
    try:
        for i, env in enumerate(envs.envs):
            stage = "step"
            obs, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            if terminated[i] or truncated[i]:
                ended.append((i, obs, info))
                stage = "reset"
                obs, _ = env.reset()
            next_obs[i] = obs
    except Exception as exc:  # the user's env: name it and the step, not a bare traceback
        raise EnvError(stage, last_lines(exc), _name_of(env)) from exc
    return next_obs, terminated, truncated, ended


def _name_of(env: gym.Env) -> str:
    """A built env's name: its id, else its class as an entry point."""
    if env.spec is not None:
        return env.spec.id
    kind = type(env.unwrapped)
    return f"{kind.__module__}:{kind.__qualname__}"


def episodes_of(ended: list[Ended]) -> list[tuple[float, int]]:
    """(raw return, length) of the episodes that ended (``RecordEpisodeStatistics``'s)."""
    return [(float(info["episode"]["r"]), int(info["episode"]["l"]))
            for _, _, info in ended if "episode" in info]
