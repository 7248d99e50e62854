"""One task run by faasrl and by Stable-Baselines3, same seeds, same stopping rule, same
held-out evaluation: what ``offpolicy.py`` (DQN, SAC on classic control) and
``mujoco_peers.py`` (PPO and SAC on MuJoCo) compare.

Both sides stop by faasrl's rule (``workflow/job.py``): the mean of the last 20 training
episodes reaches the target and a greedy 20-episode evaluation on the job's confirmation seeds
confirms it; a failed confirmation is retried ``CONFIRM_GAP`` checks later. faasrl checks once
per round, SB3 every ``check_every`` env steps. An env-step cap and a wall cap end a run that
never gets there; its final evaluation is still reported, and the means count it at its cap (a
lower bound). The reported evaluation is the final one, on the held-out seeds
(``faasrl.rl.seeds``: both sides play the same per-episode seeds). Wall time is faasrl's job
wall time (platform start excluded; cold starts, the initial policy and evaluations included)
and SB3's ``learn()`` plus its evaluations. A task whose SB3 side trains on normalized
observations (the zoo's ``normalize: true``: ``VecNormalize``) is evaluated on observations
normalized by its training statistics, as the zoo's own evaluation does.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from jobrun import run_job
from library_eval import evaluate_greedy
from rich.console import Console
from rich.table import Table
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from faasrl.jobs.store import reached_target
from faasrl.workflow.job import CONFIRM_GAP

WINDOW, EVAL_EPISODES = 20, 20


@dataclass(frozen=True)
class Task:
    """One comparison: an env, a target, faasrl's job and SB3's model for it."""

    name: str
    title: str
    env_id: str
    algorithm: str
    target: float
    check_every: int  # SB3's env steps between checks of the training window
    max_env_steps: int
    quick_env_steps: int
    sb3: Callable[[VecEnv, int, int], BaseAlgorithm]  # (env, seed, step cap) -> model
    actors: int = 2  # faasrl's fixed controller
    job: dict[str, Any] = field(default_factory=dict)  # more of faasrl's job spec
    functions: tuple[dict[str, Any], ...] = ()  # manifests deployed before the job (a variant)
    normalize: bool = False  # SB3 trains on VecNormalize'd observations and rewards
    gamma: float = 0.99  # the discount VecNormalize's reward scaling uses (the model's)
    sb3_envs: int = 1  # SB3's vector env's width
    make_env: Callable[[], gym.Env] | None = None  # SB3's env, where not gymnasium.make's


def add_peer_options(parser: argparse.ArgumentParser, quick: str) -> None:
    """The seeds, ``--quick`` (``quick`` says what it runs) and SB3's torch threads."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--sb3-threads", type=int, default=1,
                        help="torch threads for SB3 (1 is its fastest on a small MLP here)")


def peer_seeds(args: argparse.Namespace) -> list[int]:
    """The seeds to run (the first alone with ``--quick``), SB3's threads set."""
    torch.set_num_threads(args.sb3_threads)
    return args.seeds[:1] if args.quick else args.seeds


def faasrl_run(task: Task, seed: int, steps: int, wall: float) -> dict[str, Any]:
    spec = {"name": f"bench-{task.name}", "algorithm": task.algorithm, "env_id": task.env_id,
            "seed": seed, "controller": {"name": "fixed", "actors": task.actors},
            "evaluation_episodes": EVAL_EPISODES, **task.job,
            "stop": {"target_reward": task.target, "target_window": WINDOW, "max_rounds": None,
                     "max_env_steps": steps, "max_wall_s": wall}}
    job, rows = run_job(spec, label=f"faasrl {task.name} seed {seed}", timeout_s=wall + 600,
                        functions=task.functions)
    return {"wall_s": job["wall_s"], "env_steps": job["env_steps"],
            # off-policy: gradient steps; PPO: rounds (one update each)
            "updates": job["algorithm_state"].get("learner_steps", len(rows)),
            "window_mean": rows[-1]["recent_mean_return"] if rows else None,
            "eval_mean": job["evaluation"]["mean"],
            "reached": reached_target(job.get("stop_reason")),
            "stop_reason": job["stop_reason"], "rows": len(rows)}


def _window_mean(model: BaseAlgorithm) -> float | None:
    """The mean of the last ``WINDOW`` training episodes (None before there are that many)."""
    recent = [ep["r"] for ep in list(model.ep_info_buffer)[-WINDOW:]]
    return statistics.fmean(recent) if len(recent) == WINDOW else None


class _Acting:
    """The model as it acts when evaluated: on observations normalized by its training
    statistics where it trained on them."""

    def __init__(self, model: BaseAlgorithm):
        self.model = model
        env = model.get_env()
        self.normalize = env if isinstance(env, VecNormalize) else None

    def predict(self, obs: np.ndarray, deterministic: bool) -> tuple[np.ndarray, Any]:
        if self.normalize is not None:
            obs = self.normalize.normalize_obs(obs)
        return self.model.predict(obs, deterministic=deterministic)


class _ConfirmedTarget(BaseCallback):
    """Ends ``learn()`` by faasrl's rule (see the module docstring), or at the wall cap."""

    def __init__(self, task: Task, seed: int, max_wall_s: float):
        super().__init__()
        self.task, self.seed = task, seed
        self.deadline = time.perf_counter() + max_wall_s
        self.checks, self.next_confirm = 0, 0
        self.reached = False

    def _on_step(self) -> bool:
        if self.num_timesteps % self.task.check_every:
            return True
        self.checks += 1
        window = _window_mean(self.model)
        if window is not None and window >= self.task.target and self.checks >= self.next_confirm:
            confirmation = evaluate_greedy(_Acting(self.model), self.task.env_id, self.seed,
                                           "confirmation", EVAL_EPISODES, self.task.make_env)
            self.reached = confirmation >= self.task.target
            self.next_confirm = self.checks + CONFIRM_GAP
        return not self.reached and time.perf_counter() < self.deadline


def sb3_run(task: Task, seed: int, steps: int, wall: float) -> dict[str, Any]:
    env = make_vec_env(task.make_env or task.env_id, n_envs=task.sb3_envs, seed=seed)
    if task.normalize:
        env = VecNormalize(env, gamma=task.gamma)
    model = task.sb3(env, seed, steps)
    callback = _ConfirmedTarget(task, seed, wall)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=callback)
    # As faasrl: the final version is evaluated at the end, on the held-out seeds.
    held_out = evaluate_greedy(_Acting(model), task.env_id, seed, "final", EVAL_EPISODES,
                               task.make_env)
    return {"wall_s": time.perf_counter() - t0, "env_steps": int(model.num_timesteps),
            "updates": int(model._n_updates), "window_mean": _window_mean(model),
            "eval_mean": held_out, "reached": callback.reached}


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# A peer's side of a comparison: (task, seed, env-step cap, wall cap) -> sb3_run's figures.
Side = Callable[[Task, int, int, float], dict[str, Any]]


def compare(task: Task, seeds: list[int], steps: int, wall: float, console: Console,
            peers: Mapping[str, Side] | None = None) -> dict[str, Any]:
    """faasrl against SB3 (and any other ``peers``) per seed, interleaved so that drift in
    the machine's load hits every side."""
    sides: dict[str, Side] = {"sb3": sb3_run, **(peers or {})}
    runs: dict[str, list[dict[str, Any]]] = {"faasrl": [], **{name: [] for name in sides}}
    for seed in seeds:
        runs["faasrl"].append({"seed": seed, **faasrl_run(task, seed, steps, wall)})
        for name, side in sides.items():
            with console.status(f"{name} {task.name} seed {seed}"):
                runs[name].append({"seed": seed, **side(task, seed, steps, wall)})
    keys = ("wall_s", "env_steps", "updates", "window_mean", "eval_mean")
    mean = {system: {**{k: _mean([r[k] for r in rows]) for k in keys},
                     "reached": sum(r["reached"] for r in rows)}
            for system, rows in runs.items()}
    summary: dict[str, Any] = {"mean": mean, "env_step_cap": steps, "wall_cap_s": wall}
    for name in sides:
        summary[f"wall_ratio_faasrl_over_{name}"] = \
            mean["faasrl"]["wall_s"] / mean[name]["wall_s"]
        summary[f"steps_ratio_faasrl_over_{name}"] = \
            mean["faasrl"]["env_steps"] / mean[name]["env_steps"]

    table = Table("system", "seed", f"reached {task.target:g}", "env steps", "updates",
                  "wall s", f"last {WINDOW} train", "eval mean", title=task.title)
    for system, rows in runs.items():
        for r in [*rows, {**mean[system], "seed": "mean"}]:
            reached = f"{r['reached']}/{len(rows)}" if r["seed"] == "mean" else \
                "yes" if r["reached"] else "NO"
            table.add_row(system, str(r["seed"]), reached, f"{r['env_steps']:,.0f}",
                          f"{r['updates']:,.0f}", f"{r['wall_s']:.1f}",
                          _fmt(r["window_mean"]), _fmt(r["eval_mean"]),
                          style="bold" if r["seed"] == "mean" else None)
    console.print(table)
    capped = "" if all(m["reached"] == len(seeds) for m in mean.values()) else \
        " (a run that missed the target counts at its cap)"
    for name in sides:
        console.print(f"faasrl / {name}, means: wall time "
                      f"{summary[f'wall_ratio_faasrl_over_{name}']:.2f}x, env steps "
                      f"{summary[f'steps_ratio_faasrl_over_{name}']:.2f}x{capped}")
    return {"runs": runs, "summary": summary}
