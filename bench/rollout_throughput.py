"""Rollout throughput: N actor functions on the platform against the same loop in one process.

The baseline is what an actor does, done in this process: a seeded vector env and a fresh
policy, ``Rollout.collect()`` over and over, one torch thread. The platform side is a real job
with a fixed N actors per round and a minimal learner step; its throughput is the round's env
steps over the actor phase (invocation, weight fetch, rollout and the trajectory write included),
rounds after the first (the cold start) only. Rates are medians over rounds, so a
neighbour's burst on a shared machine does not decide the result. Target: at least 0.9x the
baseline per actor core.
Baselines are measured before and after the platform runs and averaged, as the machine drifts.
A second baseline runs the plain loop in N processes at once: what N cores of this machine give
with no platform at all, which separates the platform's overhead from the machine's own scaling.

    python bench/rollout_throughput.py [--rounds 20] [--out bench/results/rollout_throughput.json]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from jobrun import run_job, write_results
from rich.console import Console
from rich.table import Table

from faasrl.algorithms import ppo
from faasrl.rl.envs import make_vec_env
from faasrl.rl.policy import ActorCritic, policy_spec_for
from faasrl.rl.rollout import Rollout

# env id -> (envs per actor, steps per env per round)
WORKLOADS = {"CartPole-v1": (4, 512), "Hopper-v5": (1, 2048)}


def plain_loop(env_id: str, envs: int, steps: int, rounds: int) -> float:
    """Env steps per second (median over rounds) of the actor's loop in this process."""
    torch.manual_seed(0)
    policy = ActorCritic(policy_spec_for(env_id))
    rollout = Rollout(make_vec_env(env_id, envs, seed=0), policy, num_steps=steps, gamma=0.99,
                      seed=0)
    cfg = ppo.Config()
    ppo.actor_batch(rollout.collect()[0], cfg)  # warm-up: the platform's first round is excluded
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ppo.actor_batch(rollout.collect()[0], cfg)
        rates.append(envs * steps / (time.perf_counter() - t0))
    return statistics.median(rates)


def plain_processes(env_id: str, envs: int, steps: int, rounds: int, n: int) -> float:
    """Summed env steps per second of ``n`` plain loops running at the same time."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(n, mp_context=context, initializer=torch.set_num_threads,
                             initargs=(1,)) as pool:
        return sum(pool.map(plain_loop, [env_id] * n, [envs] * n, [steps] * n, [rounds] * n))


def on_platform(env_id: str, envs: int, steps: int, actors: int, rounds: int) -> float:
    """Env steps per second of ``actors`` actor functions over a round's actor phase (median)."""
    spec = {"env_id": env_id, "envs_per_actor": envs, "steps_per_actor": steps,
            "controller": {"name": "fixed", "actors": actors}, "evaluation_episodes": 0,
            "hyperparameters": {"update_epochs": 1, "num_minibatches": 1},
            "stop": {"max_rounds": rounds + 1}}
    _, rows = run_job(spec, label=f"{env_id} x{actors} actors")
    return statistics.median(r["env_steps"] / r["actor_phase_s"] for r in rows[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("bench/results/rollout_throughput.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    cores = os.cpu_count() or 1
    console = Console()
    table = Table("env", "actors", "steps/s", "per actor", "plain loop", "per actor / plain",
                  "N plain loops", "vs N plain loops", title="rollout throughput (env steps/s)")
    results = []
    for env_id, (envs, steps) in WORKLOADS.items():
        before = plain_loop(env_id, envs, steps, args.rounds)
        platform = {n: on_platform(env_id, envs, steps, n, args.rounds)
                    for n in range(1, cores + 1)}
        baseline = (before + plain_loop(env_id, envs, steps, args.rounds)) / 2
        for n, rate in platform.items():
            ratio = rate / n / baseline
            parallel = plain_processes(env_id, envs, steps, args.rounds, n)
            results.append({"env_id": env_id, "actors": n, "steps_per_s": rate,
                            "plain_steps_per_s": baseline, "per_actor_ratio": ratio,
                            "n_plain_steps_per_s": parallel,
                            "ratio_vs_n_plain": rate / parallel})
            table.add_row(env_id, str(n), f"{rate:,.0f}", f"{rate / n:,.0f}", f"{baseline:,.0f}",
                          f"{ratio:.2f}x", f"{parallel:,.0f}", f"{rate / parallel:.2f}x")
    console.print(table)
    worst = min(r["per_actor_ratio"] for r in results)
    console.print(f"worst per-actor ratio {worst:.2f}x (target >= 0.9x): "
                  f"{'met' if worst >= 0.9 else 'MISSED'}")
    write_results(args.out, {"results": results, "cores": cores, "target_ratio": 0.9,
                             "meets_target": worst >= 0.9})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
