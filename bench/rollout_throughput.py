"""Rollout throughput per actor core: a real job's actor against EnvPool alone and gymnasium alone.

For Atari (Pong) and MuJoCo (Hopper), the same env count, one core each (one torch thread, one
EnvPool thread), in one run:

- ``job``: a real job on an embedded platform, one actor, env_backend envpool: the round's env
  steps over the actor invocation's run time (the rows' ``actor_s_mean``: weight fetch, the
  policy's forward passes, GAE, the trajectory write), rounds after the first (cold) one.
- ``actor``: the actor handler's rollout path in this process (``make_vec_env`` with the
  envpool backend, ``Rollout.collect`` and PPO's ``actor_batch``): the job's actor without the
  invocation, the fetch and the write.
- ``envpool``: EnvPool alone, made as the actor makes it, stepped with pre-drawn random actions.
- ``gymnasium``: the gymnasium backend's vector env alone (``SyncVectorEnv.step``), likewise.
- ``actor_gymnasium``: ``actor`` with the gymnasium backend: what the backend buys an actor.

Rates are medians over rounds of ``envs * steps`` env steps; the in-process sides take turns
round by round and are measured before and after the job and averaged, as the machine drifts.
Target: ``job`` at least 0.9x ``envpool``.

    python bench/rollout_throughput.py [--rounds 10] [--quick]
        [--out bench/results/rollout_throughput.json]
"""

from __future__ import annotations

import os

# One core, as an actor function gets it (the runtime sets these in its processes): numpy's
# BLAS, which the actor's fused policy multiplies with, must not spawn threads either (on a
# loaded machine they made the in-process actor 40x slower). Set before numpy is imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from jobrun import run_job, write_results  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from faasrl.algorithms import ppo  # noqa: E402
from faasrl.jobs.spec import JobSpec  # noqa: E402
from faasrl.rl.envpool_envs import make_pool  # noqa: E402
from faasrl.rl.envs import make_vec_env  # noqa: E402
from faasrl.rl.policy import policy_spec_for  # noqa: E402
from faasrl.rl.rollout import Rollout  # noqa: E402

# env id -> (envs per actor, steps per env per round)
WORKLOADS = {"ALE/Pong-v5": (8, 128), "Hopper-v5": (8, 256)}
QUICK = {"ALE/Pong-v5": (2, 16), "Hopper-v5": (2, 32)}
TARGET = 0.9


Round = Callable[[], None]  # one round of a side: envs * steps env steps


def _actions(space: Any, envs: int, steps: int) -> np.ndarray:
    space.seed(0)
    return np.stack([np.stack([space.sample() for _ in range(envs)]) for _ in range(steps)])


def alone(env_id: str, envs: int, steps: int, backend: str) -> tuple[Round, Any]:
    """The backend's envs alone, made as the actor makes them, stepped with pre-drawn random
    actions (EnvPool itself, or the gymnasium backend's ``SyncVectorEnv.step``); and them."""
    vec = make_pool(env_id, envs, 0) if backend == "envpool" else \
        make_vec_env(env_id, envs, 0, backend="gymnasium")
    actions = _actions(vec.single_action_space, envs, steps)
    vec.reset()

    def step_round() -> None:
        for t in range(steps):
            vec.step(actions[t])

    return step_round, vec


def actor(env_id: str, envs: int, steps: int, backend: str) -> tuple[Round, Any]:
    """The actor handler's rollout path, as it runs it for a job of this env."""
    cfg = JobSpec.model_validate({"env_id": env_id}).hyperparameters
    assert isinstance(cfg, ppo.Config)
    torch.manual_seed(0)
    policy = ppo.make_model(policy_spec_for(env_id), cfg)
    policy.eval()
    vec = make_vec_env(env_id, envs, 0, gamma=cfg.gamma, backend=backend)
    rollout = Rollout(vec, policy, num_steps=steps, gamma=cfg.gamma, seed=0)
    return lambda: ppo.actor_batch(rollout.collect()[0], cfg), vec


def in_process(env_id: str, envs: int, steps: int, rounds: int) -> dict[str, float]:
    """Env steps/s of the in-process sides, medians over ``rounds`` rounds that take each side
    in turn (after one warm-up round each), so that the machine's drift hits them alike."""
    sides = {"envpool": alone(env_id, envs, steps, "envpool"),
             "gymnasium": alone(env_id, envs, steps, "gymnasium"),
             "actor": actor(env_id, envs, steps, "envpool"),
             "actor_gymnasium": actor(env_id, envs, steps, "gymnasium")}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for warm in [True] + [False] * rounds:
            for name, (step_round, _) in sides.items():
                t0 = time.perf_counter()
                step_round()
                if not warm:
                    rates[name].append(envs * steps / (time.perf_counter() - t0))
    finally:
        for _, envs_made in sides.values():
            envs_made.close()
    return {name: statistics.median(r) for name, r in rates.items()}


def through_job(env_id: str, envs: int, steps: int, rounds: int) -> float:
    spec = {"env_id": env_id, "env_backend": "envpool", "envs_per_actor": envs,
            "steps_per_actor": steps, "controller": {"name": "fixed", "actors": 1},
            "evaluation_episodes": 0,
            "hyperparameters": {"update_epochs": 1, "num_minibatches": 1},
            "stop": {"max_rounds": rounds + 1}}
    _, rows = run_job(spec, label=f"{env_id} job")
    assert all(r["env_backend"] == "envpool" for r in rows), rows
    return statistics.median(r["env_steps"] / r["actor_s_mean"] for r in rows[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="tiny workloads, 2 rounds: a smoke "
                                                             "check, not figures")
    parser.add_argument("--out", type=Path, default=Path("bench/results/rollout_throughput.json"))
    args = parser.parse_args()
    workloads, rounds = (QUICK, 2) if args.quick else (WORKLOADS, args.rounds)
    torch.set_num_threads(1)
    console = Console(width=160)
    load_before = os.getloadavg()[0]
    table = Table("env", "envs x steps", "envpool", "gymnasium", "actor", "actor (gym.)", "job",
                  "gymnasium / envpool", "actor / envpool", "actor (gym.) / envpool",
                  "job / envpool", "job / actor",
                  title="env steps/s per actor core")
    results = []
    for env_id, (envs, steps) in workloads.items():
        before = in_process(env_id, envs, steps, rounds)
        job = through_job(env_id, envs, steps, rounds)
        after = in_process(env_id, envs, steps, rounds)
        rates = {k: (before[k] + after[k]) / 2 for k in before} | {"job": job}
        ratios = {f"{k}_vs_envpool": v / rates["envpool"] for k, v in rates.items()
                  if k != "envpool"} | {"job_vs_actor": rates["job"] / rates["actor"]}
        results.append({"env_id": env_id, "envs": envs, "steps": steps,
                        "steps_per_s": rates, **ratios})
        table.add_row(env_id, f"{envs} x {steps}", *(f"{v:,.0f}" for v in rates.values()),
                      *(f"{v:.2f}x" for v in ratios.values()))
    console.print(table)
    worst = min(r["job_vs_envpool"] for r in results)
    met = worst >= TARGET
    console.print(f"worst job / envpool {worst:.2f}x (target >= {TARGET}x): "
                  f"{'met' if met else 'MISSED'}")
    load = {"before": load_before, "after": os.getloadavg()[0]}  # 1-minute load averages
    write_results(args.out, {"results": results, "cores": os.cpu_count(), "load": load,
                             "rounds": rounds,
                             "quick": args.quick, "target_ratio": TARGET, "meets_target": met})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
