"""Evaluating a library's model (Stable-Baselines3) on a faasrl job's seeds, kept apart from
``jobrun`` so that a library-only process (``sb3_ppo.py`` timed whole) imports no platform."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from faasrl.rl.seeds import Purpose, evaluation_seeds


def evaluate_greedy(model: Any, env_id: str, job_seed: int, purpose: Purpose,
                    episodes: int, make: Callable[[], gym.Env] | None = None) -> float:
    """A library model's greedy mean on the seeds a faasrl job with ``job_seed`` plays for
    ``purpose`` (episode i on its own seed), so both sides confirm on one set and report the
    held-out one. Played side by side with one batched ``predict`` per step, as faasrl's
    actors evaluate, so neither side pays per-episode forwards the other does not. ``make``
    builds an env where ``gymnasium.make(env_id)`` is not what the model acts on (Atari's
    preprocessing)."""
    seeds = evaluation_seeds(job_seed, purpose, episodes)
    envs = [(make or (lambda: gym.make(env_id)))() for _ in seeds]
    obs = [env.reset(seed=seed)[0] for env, seed in zip(envs, seeds, strict=True)]
    totals, running = [0.0] * len(envs), list(range(len(envs)))
    while running:
        actions, _ = model.predict(np.stack([obs[i] for i in running]), deterministic=True)
        still = []
        for i, action in zip(running, actions, strict=True):
            obs[i], reward, terminated, truncated, _ = envs[i].step(action)
            totals[i] += float(reward)
            if not (terminated or truncated):
                still.append(i)
        running = still
    for env in envs:
        env.close()
    return sum(totals) / len(totals)
