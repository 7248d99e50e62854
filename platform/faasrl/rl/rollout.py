"""The actor's side of every algorithm: step vector envs with a policy, hand back the raw steps
(the algorithm's ``actor_batch`` makes its batch of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.vector import SyncVectorEnv

from faasrl.env_code import EnvCode
from faasrl.rl.env_loader import EnvError, env_name, last_lines
from faasrl.rl.envs import episodes_of, make_env, step_envs
from faasrl.rl.fused import FusedPolicy
from faasrl.rl.policy import ActorCritic, PolicySpec


@dataclass(frozen=True)
class Steps:
    """One rollout of T steps in N envs, time-major: (T, N, ...) per step, (N, ...) after it.

    ``starts[t]`` is True where the observation at step t starts a new episode (the step before
    ended one); ``ends[t]`` where an episode ended with step t. An episode cut by a time limit
    has ``gamma * V(final_obs)`` added to its last reward, as if it went on.
    """

    obs: np.ndarray  # raw, spec.obs_dtype
    actions: np.ndarray
    logprobs: np.ndarray  # float32
    values: np.ndarray  # float32
    rewards: np.ndarray  # float32
    starts: np.ndarray  # bool
    ends: np.ndarray  # bool
    next_obs: np.ndarray  # the observation after the last step
    next_value: np.ndarray  # float32, its value
    next_start: np.ndarray  # bool, whether it starts an episode


class Rollout:
    """Collects fixed-length batches from ``envs`` (as :func:`make_vec_env` builds them).

    The envs are reset once here without a seed, which continues the streams ``make_vec_env``
    seeded; after that, episodes simply carry on from one :meth:`collect` to the next, so an actor
    can keep its envs warm between rounds. ``seed`` seeds the action sampling, which draws each
    collect's noise up front (:class:`~faasrl.rl.fused.FusedPolicy`). Runs on the CPU.

    The envs are stepped with :func:`~faasrl.rl.envs.step_envs` (the vector env's same-step
    autoreset, without its per-step batching of spaces and infos).
    """

    def __init__(
        self,
        envs: SyncVectorEnv,
        policy: ActorCritic,
        *,
        num_steps: int,
        gamma: float,
        seed: int,
    ) -> None:
        self.envs = envs
        self.policy = policy
        self.num_steps = num_steps
        self.gamma = gamma
        self._generator = torch.Generator().manual_seed(seed)
        obs, _ = envs.reset()
        self._obs = self._cast(obs)
        self._done = np.zeros(envs.num_envs, dtype=bool)  # does self._obs start an episode?

    def _cast(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=self.policy.spec.obs_dtype)

    def _value(self, obs: np.ndarray) -> np.ndarray:
        return self.policy.get_value(torch.from_numpy(obs)).numpy()

    @torch.no_grad()
    def collect(self) -> tuple[Steps, list[tuple[float, int]]]:
        """``num_steps`` steps in every env, and the episodes that finished (raw return,
        length)."""
        spec = self.policy.spec
        steps, n = self.num_steps, self.envs.num_envs
        obs = np.empty((steps, n, *spec.obs_shape), dtype=spec.obs_dtype)
        actions = np.empty((steps, n, *spec.action_shape), dtype=spec.action_dtype)
        rewards = np.empty((steps, n), dtype=np.float32)
        dones, ends = np.empty((steps, n), dtype=bool), np.empty((steps, n), dtype=bool)
        episodes: list[tuple[float, int]] = []
        step = FusedPolicy(self.policy)  # this round's weights
        noise, outputs = step.noise(steps, n, self._generator), step.outputs(steps, n)
        for t in range(steps):
            obs[t], dones[t] = self._obs, self._done
            actions[t] = step(self._obs, noise[t], outputs[t])
            next_obs, terminated, truncated, ended = step_envs(self.envs, actions[t], rewards[t])
            truncated_only = [(i, final) for i, final, _ in ended if not terminated[i]]
            if truncated_only:
                index = [i for i, _ in truncated_only]
                final_obs = self._cast(np.stack([final for _, final in truncated_only]))
                rewards[t, index] += self.gamma * self._value(final_obs)
            episodes += episodes_of(ended)
            self._obs, self._done = self._cast(next_obs), terminated | truncated
            ends[t] = self._done
        logprobs, values = step.log_probs_and_values(outputs, actions)
        return Steps(obs, actions, logprobs, values, rewards, dones, ends, self._obs,
                     self._value(self._obs), self._done), episodes


@dataclass
class OffPolicyActing:
    """An off-policy model as :func:`evaluate` steps a policy (``spec``, ``act``): through its
    algorithm's own ``act``, exploring only when not deterministic."""

    module: Any
    model: Any
    cfg: Any

    @property
    def spec(self) -> PolicySpec:
        return self.model.spec

    def act(self, obs: torch.Tensor, deterministic: bool, *,
            generator: torch.Generator | None = None) -> torch.Tensor:
        return self.module.act(self.model, obs, self.cfg, slot=0, actors=1,
                               generator=generator, explore=not deterministic)


def acting(module: Any, model: Any, cfg: Any) -> Any:
    """What :func:`evaluate` steps for ``module``'s ``model``: an on-policy model itself, an
    off-policy one through :class:`OffPolicyActing`."""
    return OffPolicyActing(module, model, cfg) if "offpolicy" in module.EXECUTIONS else model


@torch.no_grad()
def evaluate(
    policy: ActorCritic,
    env_id: str,
    env: EnvCode | None = None,
    *,
    episodes: int,
    seed: int,
    deterministic: bool = True,
) -> list[float]:
    """Raw returns of ``episodes`` whole episodes, each in its own :func:`make_env` env.

    Episode ``i`` resets with seed ``seed + i``, so each episode is named by its own seed and
    the caller's seed ranges (:mod:`faasrl.rl.seeds`) say exactly which episodes were played.
    The episodes are played side by side, one batched forward per step for those still
    running: a 20-episode evaluation costs about one episode's forwards, not 20 episodes'
    (a deterministic policy plays each episode as it would alone).
    """
    spec = policy.spec
    envs = [make_env(env_id, env) for _ in range(episodes)]
    generator = torch.Generator().manual_seed(seed)
    returns = [0.0] * episodes
    running = list(range(episodes))
    try:
        try:
            obs = [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)]
        except Exception as exc:
            raise EnvError("reset", last_lines(exc), env_name(env_id, env)) from exc
        while running:
            x = torch.from_numpy(np.stack([np.asarray(obs[i], dtype=spec.obs_dtype)
                                           for i in running]))
            actions = policy.act(x, deterministic, generator=generator)
            still = []
            for i, action in zip(running, actions, strict=True):
                step_action = action.item() if spec.action_kind == "discrete" else action.numpy()
                try:
                    obs[i], _, terminated, truncated, info = envs[i].step(step_action)
                except Exception as exc:
                    raise EnvError("step", last_lines(exc), env_name(env_id, env)) from exc
                if terminated or truncated:
                    returns[i] = float(info["episode"]["r"])
                else:
                    still.append(i)
            running = still
    finally:
        for e in envs:
            e.close()
    return returns
