"""Off-policy training against the single-process library, same run: faasrl's DQN and SAC
against Stable-Baselines3's, each to a confirmed target, DQN's time per gradient step against
SB3's, and an Atari smoke run of faasrl's uint8 frame path.

- DQN, CartPole-v1 to 475. faasrl runs its own CartPole defaults (``FAMILY_DEFAULTS`` of
  ``faasrl.algorithms.dqn``: dueling double DQN, 3-step returns, prioritized replay in the
  buffer function, replay ratio 0.5) with the default fixed controller's 2 Ape-X actors, the
  same for every seed. SB3 runs rl-baselines3-zoo's CartPole-v1 hyper-parameters
  (``hyperparams/dqn.yml``; rl_zoo3 is not installed here, so these are the zoo's values as
  published): lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000, gamma 0.99,
  target_update_interval 10, train_freq 256, gradient_steps 128, net_arch [256, 256], ε from 1
  to 0.04 over 16% of the zoo's 5e4 steps (8k steps: the fraction is rescaled to the step cap,
  so a longer cap does not stretch the schedule).
- SAC, Pendulum-v1 to -200. faasrl: its Pendulum defaults (``faasrl.algorithms.sac``); SB3:
  the zoo's Pendulum-v1 entry (``hyperparams/sac.yml``: lr 1e-3 for 20k steps, everything
  else SB3's defaults).
- DQN per gradient step (``--tasks step``, also in a default run: about a minute; ``--quick``:
  a few seconds): faasrl's buffer and learner computation for a gradient step against SB3's
  ``DQN.train``, same network widths, batch and optimizer, alternating blocks in one process
  (:mod:`dqn_step` says what each side includes).
- Atari smoke (``--atari``, also in a default run: about 1.5 minutes here): faasrl DQN on
  ALE/Pong-v5 for a few thousand env steps with a tiny memory and learning_starts; it checks
  that metrics rows are written and that the buffer stores frames as uint8
  (``bytes_per_transition``).

Both sides stop by the same rule and are evaluated on the same held-out seeds
(``peer_runs.py`` says how); faasrl's training window is its greediest actor's, SB3's its single
env's, and SB3 checks every ``check_every`` env steps (DQN: its train_freq). For DQN the rule is
harder on SB3: its training episodes keep exploring with ε = 0.04, faasrl's greediest Ape-X
actor with ε = 0.4^8 ≈ 0.0007, so the table also shows each run's last training window.

Where faasrl is expected to lose, on a 2-core machine: every learner call, sample and actor
rollout is a function invocation with Redis hops in between (weights, transitions, samples,
priorities), and the actors, the buffer, the learner and Redis compete for two cores that SB3
has to itself; faasrl's win is elsewhere (actors and learner on separate machines, a replay
memory that survives a crash). The numbers decide.

    python bench/offpolicy.py [--seeds 1 2 3] [--quick] [--tasks dqn sac step atari] [--atari]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dqn_step import compare_steps
from jobrun import run_job, write_results
from peer_runs import Task, add_peer_options, compare, peer_seeds
from rich.console import Console
from rich.table import Table
from stable_baselines3 import DQN, SAC
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from faasrl.algorithms.offpolicy import (
    stored_transition_bytes,
    transition_bytes,
    transition_layout,
)
from faasrl.rl.policy import policy_spec_for

ZOO_DQN_STEPS = 50_000  # the zoo's CartPole n_timesteps, over which its ε schedule runs


def _sb3_dqn(env: VecEnv, seed: int, cap: int) -> BaseAlgorithm:
    return DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
               learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256,
               gradient_steps=128, exploration_fraction=0.16 * ZOO_DQN_STEPS / cap,
               exploration_final_eps=0.04, policy_kwargs={"net_arch": [256, 256]}, seed=seed,
               device="cpu")


def _sb3_sac(env: VecEnv, seed: int, cap: int) -> BaseAlgorithm:
    return SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")


TASKS = {
    "dqn": Task("dqn", "DQN CartPole-v1 to 475", "CartPole-v1", "dqn", 475.0, check_every=256,
                max_env_steps=150_000, quick_env_steps=ZOO_DQN_STEPS, sb3=_sb3_dqn),
    # faasrl closes a SAC round every 256 env steps (256 gradient steps at replay ratio 1)
    "sac": Task("sac", "SAC Pendulum-v1 to -200", "Pendulum-v1", "sac", -200.0, check_every=256,
                max_env_steps=60_000, quick_env_steps=20_000, sb3=_sb3_sac),
}
MAX_WALL_S, QUICK_WALL_S = 1800.0, 300.0
STEP_BLOCKS, QUICK_STEP_BLOCKS = 20, 2  # alternating blocks per side


ATARI_ENV = "ALE/Pong-v5"
ATARI_SPEC: dict[str, Any] = {
    "name": "bench-atari-smoke", "algorithm": "dqn", "env_id": ATARI_ENV, "seed": 1,
    "controller": {"name": "fixed", "actors": 1}, "steps_per_actor": 128,
    "hyperparameters": {"memory_size": 4_096, "learning_starts": 512, "batch_size": 32,
                        "publish_every": 4, "steps_per_round": 32},
    "evaluation_episodes": 1,  # one greedy Pong episode: the evaluation path sees frames too
    "stop": {"max_rounds": None, "max_env_steps": 3_000, "max_wall_s": 600},
}


def atari_smoke(console: Console) -> dict[str, Any]:
    """faasrl DQN on Pong for a few thousand steps: rows are written, frames stay uint8 and
    the memory holds each distinct frame once."""
    job, rows = run_job(ATARI_SPEC, label="faasrl atari smoke", timeout_s=900)
    spec = policy_spec_for(ATARI_ENV)  # the buffer function's layout for its transitions
    layout = transition_layout(spec.obs_shape, spec.obs_dtype, spec.action_shape,
                               spec.action_dtype)
    as_float = {k: ("float32", shape) if k in ("obs", "next_obs") else (dtype, shape)
                for k, (dtype, shape) in layout.items()}
    stored = next((r["bytes_per_transition"] for r in reversed(rows)
                   if r.get("bytes_per_transition") is not None), None)
    transitions = sum(r.get("transitions", 0) for r in rows)
    wire = sum(r.get("bytes_from_actors", 0) for r in rows) / max(1, transitions)
    out = {"env_id": ATARI_ENV, "rows": len(rows), "env_steps": job["env_steps"],
           "transitions": transitions, "gradient_steps": job["algorithm_state"].get(
               "learner_steps", 0), "wall_s": job["wall_s"],
           "bytes_per_transition": stored, "bytes_per_transition_bound": stored_transition_bytes(
               layout), "bytes_per_transition_uint8": transition_bytes(layout),
           "bytes_per_transition_float32": transition_bytes(as_float),
           "actor_bytes_per_transition": wire, "eval_mean": job["evaluation"]["mean"],
           "stop_reason": job["stop_reason"]}
    out["ok"] = bool(rows) and stored is not None and \
        stored <= out["bytes_per_transition_bound"] < out["bytes_per_transition_uint8"]
    table = Table("rows", "env steps", "transitions", "gradient steps", "wall s",
                  "stored B/transition", "its bound", "uint8 stacks", "float32 stacks",
                  "sent B/transition (lz4)",
                  title=f"DQN {ATARI_ENV} smoke (uint8 frame path)")
    table.add_row(str(out["rows"]), f"{out['env_steps']:,}", f"{transitions:,}",
                  f"{out['gradient_steps']:,}", f"{out['wall_s']:.1f}",
                  "-" if stored is None else f"{stored:,}",
                  f"{out['bytes_per_transition_bound']:,}",
                  f"{out['bytes_per_transition_uint8']:,}",
                  f"{out['bytes_per_transition_float32']:,}", f"{wire:,.0f}")
    console.print(table)
    console.print("atari smoke: " + ("ok" if out["ok"] else "[red]FAILED[/red]: no rows, or "
                                     "frames stored more than once"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_options(parser, "the first seed only, with the zoo's step budgets as caps")
    parser.add_argument("--tasks", nargs="+", choices=[*TASKS, "step", "atari"],
                        default=[*TASKS, "step", "atari"])
    parser.add_argument("--atari", dest="tasks", action="store_const", const=["atari"],
                        help="only the Atari smoke run")
    parser.add_argument("--out", type=Path, default=Path("bench/results/offpolicy.json"))
    args = parser.parse_args()
    seeds = peer_seeds(args)
    console = Console()
    results: dict[str, Any] = {"seeds": seeds, "quick": args.quick}
    for name in args.tasks:  # results are written after each task: a later failure keeps them
        if name == "atari":
            results["atari"] = atari_smoke(console)
        elif name == "step":
            results["step"] = compare_steps(
                console, repetitions=QUICK_STEP_BLOCKS if args.quick else STEP_BLOCKS,
                units=4 if args.quick else 16)
        else:
            task = TASKS[name]
            steps = task.quick_env_steps if args.quick else task.max_env_steps
            results[name] = compare(task, seeds, steps,
                                    QUICK_WALL_S if args.quick else MAX_WALL_S, console)
        write_results(args.out, results)
    console.print(f"wrote {args.out}")
    if not results.get("atari", {"ok": True})["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
