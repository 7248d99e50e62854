"""PPO and DQN on Atari Pong against Stable-Baselines3, same run: faasrl's job against the
library's zoo-tuned model, each for a fixed wall time, held-out evaluation, the frames per
second each trained at and the return each reached.

The issue's target is a held-out +18; a 2-core machine gets nowhere near it in the time a run
can take, so the default run is what the issue asks of such a machine: 30 minutes of training a
side, then the held-out evaluation, honestly labelled as that (``--max-wall-s`` for longer).

- PPO: faasrl runs its Atari defaults (``FAMILY_DEFAULTS`` of ``faasrl.algorithms.ppo``: 8 envs
  x 128 steps an actor, 4 epochs of 4 minibatches, lr 2.5e-4, clip 0.1, the Nature CNN and a
  512-wide layer) with the fixed controller's 2 actors and the env backend the platform picks
  for Atari (gymnasium's: EnvPool bought a Pong actor nothing measurable on one core, see
  ``rollout_throughput.py``). SB3 runs rl-baselines3-zoo's ``atari`` entry of
  ``hyperparams/ppo.yml`` (rl_zoo3 is not installed here; the zoo's values as published):
  CnnPolicy, 8 envs, n_steps 128, batch 256, 4 epochs, lr and clip range linear from 2.5e-4 and
  0.1 over the zoo's 10M steps, ent_coef 0.01, vf_coef 0.5. Its envs are faasrl's evaluation
  envs (``faasrl.rl.envs.make_env``: gymnasium's ALE with no-op 30, frame skip 4, 84x84 grey, a
  4-frame stack, no life-loss terminal), so both sides learn and are evaluated on one
  preprocessing; the zoo's ``AtariWrapper`` differs only where Pong has nothing to differ on
  (lives, reward clipping: Pong's rewards are -1, 0, 1 and it has no lives).
- DQN (``--algorithm dqn``): SB3 runs the zoo's ``atari`` entry of ``hyperparams/dqn.yml``
  (``ZOO_DQN``): CnnPolicy, one env, a 100k-transition buffer filled before learning, batch
  32, one gradient step per 4 env steps, the target synced every 1,000 env steps, lr 1e-4,
  gradients clipped at 10, epsilon from 1 to 0.01 over the first 10 % of the zoo's 10M steps.
  faasrl's job says the same cadence in its words (a memory of 100k filled before learning,
  batch 32, 0.25 gradient steps per env step, the target synced every 250 gradient steps, in a
  buffer function deployed with room for it) and keeps its own DQN otherwise: two Ape-X actors
  (epsilon 0.4 and 0.4^8), 3-step returns, prioritized replay, a dueling double-Q learner.
  Both learn on the envs above.

A frame is an emulator frame: an env step is 4 (the frame skip). The rule both sides stop by,
and the held-out evaluation, are ``peer_runs.py``'s; here the wall cap ends both.

faasrl's learner runs on its actors' cores too while they wait for it (the job's
``lend_actor_cores``, on for Atari), as SB3 trains on all of them; ``--own-cores`` turns that
off, the learner then training on its manifest's one core.

``--gpu`` (a machine with CUDA) puts both updates on the GPU: faasrl's learner manifest deployed
with ``gpu: 1`` under another name, which the job's ``learner_function`` names, and SB3's model
on ``cuda``. The actors and SB3's envs stay on the CPU, as they would on any GPU machine.

    python bench/atari_peers.py [--algorithm ppo|dqn] [--seeds 1 2 3] [--quick] [--max-wall-s S]
        [--own-cores] [--gpu]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from pathlib import Path
from typing import Any

import torch
from jobrun import write_results
from peer_runs import Task, add_peer_options, compare, peer_seeds
from rich.console import Console
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from faasrl.manifest import load_manifest
from faasrl.rl.envs import make_env

ENV_ID = "ALE/Pong-v5"
FRAME_SKIP = 4
ZOO_ENVS, ZOO_STEPS = 8, 10_000_000  # the zoo trains Atari PPO 10M steps on 8 envs
MAX_WALL_S, QUICK_WALL_S = 1800.0, 300.0
REPO = Path(__file__).resolve().parents[1]
LEARNER_DIR = REPO / "functions" / "learner"


def _linear(start: float):
    """The zoo's ``lin_<start>``: from ``start`` to 0 over the run's total_timesteps."""
    return lambda progress_remaining: progress_remaining * start


def _sb3_ppo_atari(env: VecEnv, seed: int, cap: int, device: str = "cpu") -> BaseAlgorithm:
    return PPO("CnnPolicy", env, n_steps=128, batch_size=256, n_epochs=4,
               learning_rate=_linear(2.5e-4), clip_range=_linear(0.1), ent_coef=0.01,
               vf_coef=0.5, seed=seed, device=device)


PONG = Task("ppo-pong", "PPO ALE/Pong-v5 to 18", ENV_ID, "ppo", 18.0, check_every=1_024,
            max_env_steps=ZOO_STEPS, quick_env_steps=2_048, sb3=_sb3_ppo_atari,
            sb3_envs=ZOO_ENVS, make_env=functools.partial(make_env, ENV_ID))

# The zoo's DQN entry for Atari, in SB3's words.
ZOO_DQN = {"buffer_size": 100_000, "learning_starts": 100_000, "batch_size": 32,
           "train_freq": 4, "gradient_steps": 1, "target_update_interval": 1_000,
           "learning_rate": 1e-4, "max_grad_norm": 10.0}
# A replay memory of the zoo's size needs more than the built-in buffer's 4,096 MiB (the
# gateway refuses the job and says how much): the bench deploys it larger under another name.
BUFFER_MB = 8_192


def sb3_dqn_atari(env: VecEnv, seed: int, cap: int, device: str = "cpu") -> BaseAlgorithm:
    return DQN("CnnPolicy", env, **ZOO_DQN, exploration_fraction=0.1,
               exploration_final_eps=0.01, optimize_memory_usage=False, seed=seed, device=device)


def _zoo_dqn_job() -> tuple[dict[str, Any], dict[str, Any]]:
    """``ZOO_DQN`` in faasrl's words (gradient steps per env step, the target synced in
    gradient steps), and the buffer function that holds its memory."""
    ratio = ZOO_DQN["gradient_steps"] / ZOO_DQN["train_freq"]
    hp = {"memory_size": ZOO_DQN["buffer_size"], "learning_starts": ZOO_DQN["learning_starts"],
          "batch_size": ZOO_DQN["batch_size"], "updates_per_step": ratio,
          "target_update": round(ZOO_DQN["target_update_interval"] * ratio),
          "learning_rate": ZOO_DQN["learning_rate"], "max_grad_norm": ZOO_DQN["max_grad_norm"]}
    buffer = load_manifest(REPO / "functions" / "buffer")
    name = f"{buffer.name}-{BUFFER_MB // 1024}g"
    manifest = buffer.model_copy(update={"name": name, "memory_mb": BUFFER_MB})
    return ({"hyperparameters": hp, "buffer_function": name},
            manifest.model_dump(mode="json", exclude_defaults=True))


PONG_DQN_JOB, PONG_DQN_BUFFER = _zoo_dqn_job()
PONG_DQN = Task("dqn-pong", "DQN ALE/Pong-v5 to 18", ENV_ID, "dqn", 18.0, check_every=1_024,
                max_env_steps=ZOO_STEPS, quick_env_steps=2_048, sb3=sb3_dqn_atari,
                make_env=functools.partial(make_env, ENV_ID), job=PONG_DQN_JOB,
                functions=(PONG_DQN_BUFFER,))
TASKS = {"ppo": PONG, "dqn": PONG_DQN}


def on_gpu(task: Task) -> Task:
    """``task`` with both updates on the GPU: faasrl's built-in learner deployed with
    ``gpu: 1`` under another name, which the job names, and SB3's model on ``cuda``."""
    learner = load_manifest(LEARNER_DIR)
    name = f"{learner.name}-gpu"
    manifest = learner.model_copy(update={"name": name, "gpu": 1})
    return dataclasses.replace(
        task, job={**task.job, "learner_function": name},
        functions=(*task.functions, manifest.model_dump(mode="json", exclude_defaults=True)),
        sb3=functools.partial(task.sb3, device="cuda"))


def frames_per_s(result: dict[str, Any]) -> dict[str, float]:
    """Each side's emulator frames per second of its run's wall time (seeds pooled)."""
    return {side: FRAME_SKIP * sum(r["env_steps"] for r in runs) / sum(r["wall_s"] for r in runs)
            for side, runs in result["runs"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_options(parser, "the first seed only, a few thousand env steps: does it all run?")
    parser.set_defaults(sb3_threads=2)  # a CNN's update: SB3 gets both cores, as faasrl does
    parser.add_argument("--algorithm", choices=list(TASKS), default="ppo")
    parser.add_argument("--max-wall-s", type=float, help=f"each run's wall cap "
                                                         f"(default {MAX_WALL_S:.0f})")
    parser.add_argument("--own-cores", action="store_true",
                        help="faasrl's learner on its own core only (lend_actor_cores: false)")
    parser.add_argument("--gpu", action="store_true",
                        help="both updates on the GPU (faasrl's learner with gpu: 1)")
    parser.add_argument("--out", type=Path,
                        help="default bench/results/atari_peers_<algorithm>.json")
    args = parser.parse_args()
    if args.gpu and not torch.cuda.is_available():
        parser.error("--gpu: torch finds no CUDA device here")
    seeds = peer_seeds(args)
    out = args.out or Path(f"bench/results/atari_peers_{args.algorithm}.json")
    console = Console()
    task = TASKS[args.algorithm]
    if args.own_cores:
        task = dataclasses.replace(task, job={**task.job, "lend_actor_cores": False})
    task = on_gpu(task) if args.gpu else task
    steps = task.quick_env_steps if args.quick else task.max_env_steps
    wall = QUICK_WALL_S if args.quick else args.max_wall_s or MAX_WALL_S
    result = compare(task, seeds, steps, wall, console)
    result["frames_per_s"] = fps = frames_per_s(result)
    write_results(out, {"seeds": seeds, "quick": args.quick,
                       "own_cores": args.own_cores, "gpu": args.gpu, task.name: result})
    console.print(f"frames/s: faasrl {fps['faasrl']:,.0f}, SB3 {fps['sb3']:,.0f} "
                  f"({fps['faasrl'] / fps['sb3']:.2f}x)")
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
