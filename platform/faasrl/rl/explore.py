"""The actor's side of off-policy training: step vector envs with an exploring policy and build
n-step transitions from the steps, as they complete.

The actor, not the buffer, builds them: it holds each env's consecutive steps anyway, so the
buffer stores and samples whole transitions (s_t, a_t, R_t^(n), s_{t+m}, γ^m) without
re-assembling sequences across actors, and the actor can compute each one's TD error (its
initial priority) before it ships. A transition whose n steps run past this invocation waits
in the env's pending steps for the next one (the envs stay warm in the container). An episode
that ends (terminated) cuts its pending transitions with discount 0; one cut by a time limit
bootstraps them from its final observation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from gymnasium.vector import SyncVectorEnv

from faasrl.rl.envs import episodes_of, step_envs


@dataclass
class _Step:
    obs: np.ndarray
    action: np.ndarray
    reward: float


@dataclass
class Transitions:
    """Rows of (obs, actions, returns, next_obs, discounts), in the order they completed."""

    obs: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    next_obs: list[np.ndarray] = field(default_factory=list)
    discounts: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.returns)

    def arrays(self, obs_dtype: str, action_dtype: str) -> dict[str, np.ndarray]:
        return {"obs": np.asarray(self.obs, dtype=obs_dtype),
                "actions": np.asarray(self.actions, dtype=action_dtype),
                "returns": np.asarray(self.returns, dtype=np.float32),
                "next_obs": np.asarray(self.next_obs, dtype=obs_dtype),
                "discounts": np.asarray(self.discounts, dtype=np.float32)}


class Explorer:
    """Steps ``envs`` (as :func:`~faasrl.rl.envs.make_vec_env` builds them, same-step
    autoreset) and keeps each env's last steps until their n-step transitions complete."""

    def __init__(self, envs: SyncVectorEnv, *, n_step: int, gamma: float):
        self.envs, self.n, self.gamma = envs, n_step, gamma
        obs, _ = envs.reset()
        self._obs = np.asarray(obs)
        self._pending: list[deque[_Step]] = [deque() for _ in range(envs.num_envs)]

    def collect(self, act: Callable[[np.ndarray], np.ndarray], steps: int
                ) -> tuple[Transitions, list[tuple[float, int]]]:
        """``steps`` steps in every env with ``act`` (a batch of observations -> actions):
        the transitions completed, and the episodes that finished (raw return, length)."""
        out, episodes = Transitions(), []
        for _ in range(steps):
            actions = act(self._obs)
            rewards = np.empty(self.envs.num_envs)
            next_obs, terminated, _, ended = step_envs(self.envs, actions, rewards)
            final_obs = {e: obs for e, obs, _ in ended}
            for e, pending in enumerate(self._pending):
                pending.append(_Step(self._obs[e], actions[e], float(rewards[e])))
                if e in final_obs:  # a time limit's cut is bootstrapped, an end is not
                    self._flush(pending, final_obs[e], 0.0 if terminated[e] else 1.0, out)
                elif len(pending) == self.n:
                    self._emit(pending, next_obs[e], 1.0, out)
            episodes += episodes_of(ended)
            self._obs = next_obs
        return out, episodes

    def _emit(self, pending: deque[_Step], next_obs: np.ndarray, bootstrap: float,
              out: Transitions) -> None:
        """The oldest pending step's transition, bootstrapped from ``next_obs`` after the
        ``len(pending)`` steps it sums (``bootstrap`` 0: the episode ended there)."""
        first = pending.popleft()
        total = first.reward + sum(self.gamma ** (k + 1) * s.reward
                                   for k, s in enumerate(pending))
        out.obs.append(first.obs)
        out.actions.append(first.action)
        out.returns.append(total)
        out.next_obs.append(np.asarray(next_obs))
        out.discounts.append(bootstrap * self.gamma ** (len(pending) + 1))

    def _flush(self, pending: deque[_Step], final_obs: np.ndarray, bootstrap: float,
               out: Transitions) -> None:
        while pending:
            self._emit(pending, final_obs, bootstrap, out)
