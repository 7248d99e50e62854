"""Training a MinionsRL scheduler with PPO: on whole training jobs or on a simulated workload.

One episode is one whole job: the scheduler (sampling) picks I_k every round, the job's metrics
rows give the states, actions and rewards afterwards. Every ``episodes_per_update`` episodes the
scheduler gets a PPO update (``faasrl.algorithms.ppo``) with the paper's settings: separate
2x64 tanh policy and critic, Adam 5e-3, gamma 0.99, clip 0.2, KL target 0.01, entropy 0.01,
value 0.5.
It imports torch: the CLI and the benchmark use it, the gateway never does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from faasrl import round_row as rr
from faasrl.algorithms.ppo import Config as PPOConfig
from faasrl.algorithms.ppo import compute_gae
from faasrl.algorithms.ppo import update as ppo_update
from faasrl.controllers.minions import (
    FEATURES,
    Minions,
    round_reward,
    scheduler_i_max,
    terminal_penalty,
)
from faasrl.controllers.saved_schedulers import save_scheduler
from faasrl.jobs.store import reached_target
from faasrl.rl.policy import ActorCritic, PolicySpec
from faasrl.scheduler_training.workload import SimulatedWorkload


@dataclass
class Episode:
    """A finished job as the scheduler saw it."""

    rows: list[dict[str, Any]]
    reached: bool
    target: float | None
    budget_left: float | None = None


@dataclass
class TrainingConfig:
    i_max: int = 32
    beta: float = 0.1  # r_k = -beta * P_k ...
    eta: float = 0.0  # ... - eta * C_k (the cost-weighted variant when > 0)
    episodes_per_update: int = 2
    seed: int = 0
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(
        learning_rate=5e-3, anneal_lr=False, gamma=0.99, gae_lambda=0.95, update_epochs=8,
        num_minibatches=2, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, target_kl=0.01))


def new_scheduler(i_max: int, seed: int) -> ActorCritic:
    torch.manual_seed(seed)
    return ActorCritic(PolicySpec(obs_shape=(len(FEATURES),), obs_dtype="float32",
                                  action_kind="discrete", action_dim=i_max, hidden=(64, 64),
                                  normalize_obs=True))


def to_numpy(model: ActorCritic) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def from_numpy(weights: dict[str, np.ndarray]) -> ActorCritic:
    model = new_scheduler(scheduler_i_max(weights), 0)
    model.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
    return model


def episode_rewards(ep: Episode, cfg: TrainingConfig) -> list[float]:
    """r_k per round, the terminal term added to the last."""
    rewards = [round_reward(row, cfg.beta, cfg.eta) for row in ep.rows]
    returns = [r[rr.MEAN_RETURN] for r in ep.rows if r.get(rr.MEAN_RETURN) is not None]
    if rewards:
        rewards[-1] += terminal_penalty(max(returns, default=None), ep.target, ep.reached,
                                        ep.budget_left)
    return rewards


class SchedulerTrainer:
    """Runs episodes through ``run_episode(weights, episode_index)`` and updates the scheduler."""

    def __init__(self, cfg: TrainingConfig, weights: dict[str, np.ndarray] | None = None):
        self.cfg = cfg
        self.model = new_scheduler(cfg.i_max, cfg.seed) if weights is None else from_numpy(weights)
        if int(self.model.spec.action_dim) != cfg.i_max:
            raise ValueError(f"the scheduler has I_max {self.model.spec.action_dim}, not "
                             f"{cfg.i_max}")
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.ppo.learning_rate)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.returns: list[float] = []  # the scheduler's return per episode
        self.wall_s = 0.0

    def weights(self) -> dict[str, np.ndarray]:
        return to_numpy(self.model)

    def train(self, run_episode: Callable[[dict[str, np.ndarray], int], Episode],
              episodes: int, on_episode: Callable[[int, Episode, float], None] | None = None
              ) -> None:
        t0 = time.perf_counter()
        pending: list[Episode] = []
        for i in range(episodes):
            ep = run_episode(self.weights(), i)
            if not ep.rows:
                raise RuntimeError(f"episode {i}: the job ran no round")
            ret = sum(episode_rewards(ep, self.cfg))
            self.returns.append(ret)
            pending.append(ep)
            if len(pending) == self.cfg.episodes_per_update or i == episodes - 1:
                self.update(pending)
                pending = []
            if on_episode is not None:
                on_episode(i, ep, ret)
        self.wall_s += time.perf_counter() - t0

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """One PPO update on whole episodes (GAE per episode, no bootstrap at its end)."""
        cfg, model = self.cfg.ppo, self.model
        states = [np.asarray([r[rr.CONTROLLER]["state"] for r in ep.rows], np.float32)
                  for ep in episodes]
        actions = [np.asarray([r[rr.CONTROLLER]["action"] - 1 for r in ep.rows], np.int64)
                   for ep in episodes]
        obs = torch.as_tensor(np.concatenate(states))
        act = torch.as_tensor(np.concatenate(actions))
        with torch.no_grad():
            _, logprobs, _, values = model.get_action_and_value(obs, act)
        advantages, returns, start = [], [], 0
        for ep, s in zip(episodes, states, strict=True):
            v = values[start:start + len(s)].numpy()[:, None]
            rewards = np.asarray(episode_rewards(ep, self.cfg), np.float32)[:, None]
            adv, ret = compute_gae(rewards, v, np.zeros_like(v), np.zeros(1, np.float32),
                                   np.ones(1, np.float32), cfg.gamma, cfg.gae_lambda)
            advantages.append(adv[:, 0])
            returns.append(ret[:, 0])
            start += len(s)
        batch = {"obs": obs, "actions": act, "logprobs": logprobs, "values": values,
                 "advantages": torch.as_tensor(np.concatenate(advantages)),
                 "returns": torch.as_tensor(np.concatenate(returns))}
        # at least 4 rounds per minibatch: a minibatch of one has no advantage spread
        cfg = cfg.model_copy(update={
            "num_minibatches": max(1, min(cfg.num_minibatches, len(obs) // 4))})
        stats, _ = ppo_update(model, self.optimizer, batch, cfg, generator=self.generator)
        model.update_obs_stats(obs)
        return stats

    def meta(self, **extra: Any) -> dict[str, Any]:
        """What is saved next to the weights: settings, features and the training's cost."""
        return {"i_max": self.cfg.i_max, "features": list(FEATURES), "beta": self.cfg.beta,
                "eta": self.cfg.eta, "episodes": len(self.returns),
                "episode_returns": self.returns, "training_wall_s": self.wall_s, **extra}


def simulated_episodes(workload: SimulatedWorkload, seed: int = 0
                       ) -> Callable[[dict[str, np.ndarray], int], Episode]:
    """Episodes on the simulated workload: the scheduler samples, seeded per episode."""
    def run(weights: dict[str, np.ndarray], index: int) -> Episode:
        rows, reached = workload.run(Minions(weights, sample=True), seed * 100_003 + index)
        left = None if workload.budget_usd is None else workload.budget_usd - rows[-1]["cost_total"]
        return Episode(rows, reached, workload.target, left)
    return run


def evaluate_on_workload(weights: dict[str, np.ndarray], workload: SimulatedWorkload,
                         seeds: list[int], cfg: TrainingConfig) -> dict[str, float]:
    """The greedy scheduler's mean return, total time and rounds over ``seeds``."""
    out = {"return": 0.0, "time_s": 0.0, "rounds": 0.0, "reached": 0.0}
    for seed in seeds:
        rows, reached = workload.run(Minions(weights), seed)
        left = None if workload.budget_usd is None else workload.budget_usd - rows[-1]["cost_total"]
        ep = Episode(rows, reached, workload.target, left)
        out["return"] += sum(episode_rewards(ep, cfg)) / len(seeds)
        out["time_s"] += sum(r[rr.ROUND_S] for r in rows) / len(seeds)
        out["rounds"] += len(rows) / len(seeds)
        out["reached"] += reached / len(seeds)
    return out


def job_episodes(client: Any, spec: dict[str, Any], name: str, folder: Path,
                 meta: Callable[[], dict[str, Any]], timeout_s: float = 3600
                 ) -> Callable[[dict[str, np.ndarray], int], Episode]:
    """Episodes as whole training jobs on a platform (``client``: a ``faasrl.client.Client``)
    whose schedulers folder is ``folder``: the current weights are saved as ``name``, a job runs
    ``spec`` with the scheduler sampling (job seed = spec seed + episode), and is deleted after."""
    stop = spec.get("stop", {})

    def run(weights: dict[str, np.ndarray], index: int) -> Episode:
        save_scheduler(folder, name, weights, meta())
        body = {**spec, "seed": int(spec.get("seed", 1)) + index,
                "controller": {"name": "minions", "scheduler": name, "sample": True}}
        job = client.submit(body)
        deadline = time.monotonic() + timeout_s
        while (job := client.job(job["id"]))["status"] in ("pending", "running"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"episode {index}: job {job['id']} still running")
            time.sleep(0.2)
        if job["status"] != "succeeded":
            raise RuntimeError(f"episode {index}: job {job['status']}: {job.get('error')}")
        rows = client.job_metrics(job["id"])
        client.delete_job(job["id"])
        budget = stop.get("budget_usd")
        return Episode(rows, reached_target(job.get("stop_reason")),
                       stop.get("target_reward"),
                       None if budget is None else budget - job["cost_usd"])
    return run
