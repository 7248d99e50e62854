"""PPO and SAC on MuJoCo against Stable-Baselines3, same run: faasrl's jobs against the
library's zoo-tuned models, each to a held-out return, 3 seeds. (Not ``mujoco.py``: a script's
folder comes first on ``sys.path``, and that name would hide the ``mujoco`` package.)

- PPO, Hopper-v5 to 2,000. faasrl runs its MuJoCo defaults (``FAMILY_DEFAULTS`` of
  ``faasrl.algorithms.ppo``: 2,048 steps an actor, 10 epochs of 32 minibatches, lr 3e-4,
  rewards normalized in the actor's env) with the fixed controller's 2 actors and the env
  backend the platform picks (EnvPool where installed). SB3 runs rl-baselines3-zoo's Hopper
  entry (``hyperparams/ppo.yml``; rl_zoo3 is not installed here, so these are the zoo's values
  as published): VecNormalize on observations and rewards, one env, n_steps 512, batch 32,
  5 epochs, lr 9.80828e-5, gamma 0.999, gae_lambda 0.99, clip 0.2, ent_coef 0.00229519,
  vf_coef 0.835671, max_grad_norm 0.7, log_std_init -2, no orthogonal init, ReLU
  [256, 256] policy and value nets.
- PPO, HalfCheetah-v5 to 3,000 (``--tasks ppo-halfcheetah``): the zoo's HalfCheetah entry on
  both sides (faasrl's MuJoCo defaults, tuned on Hopper, reach a held-out 1,896 in 1M steps
  here where the entry passes 3,000 in 300k): VecNormalize, one env, n_steps 512, batch 64, 20
  epochs, lr 2.0633e-5, gamma 0.98, gae_lambda 0.92, clip 0.1, ent_coef 0.000401762, vf_coef
  0.58096, max_grad_norm 0.8, and the Hopper entry's network (log_std_init -2, no orthogonal
  init, ReLU [256, 256]). faasrl's job is ``examples/halfcheetah-ppo.yaml`` (checked here to
  be that entry): 2 actors of one env x 512 steps, 20 epochs of 16 minibatches of 64, the same
  coefficients and network (its init orthogonal), observations and rewards normalized as its
  MuJoCo defaults do.
- SAC, Hopper-v5 to 2,000 (``--tasks sac``): faasrl's MuJoCo SAC defaults against the zoo's
  Hopper entry (SB3's defaults with learning_starts 10,000).

The rule both sides stop by, and the held-out evaluation, are ``peer_runs.py``'s. The zoo
trains Hopper for 1M steps; that is the default cap here, with a wall cap of an hour a run.
``--max-env-steps`` and ``--max-wall-s`` lower them for a run that fits a machine's time:
the table then says which runs reached the target and the means count the others at their cap.

Where faasrl is expected to lose, on a 2-core machine: its actors, learner and Redis share the
two cores SB3 has to itself, and each round pays invocations and the trajectory transfer; its
learner makes 320 minibatch steps per 4,096 env steps where the zoo's SB3 makes 80 per 512.

    python bench/mujoco_peers.py [--seeds 1 2 3] [--quick] [--tasks ppo ppo-halfcheetah sac]
        [--max-env-steps N] [--max-wall-s S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import torch
from jobrun import write_results
from peer_runs import EVAL_EPISODES, WINDOW, Task, add_peer_options, compare, peer_seeds
from rich.console import Console
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from faasrl.user_input import load_yaml
from faasrl.workflow.job import CONFIRM_GAP

ZOO_HOPPER_GAMMA, ZOO_HALFCHEETAH_GAMMA = 0.999, 0.98


# The network both zoo PPO entries here use, in faasrl's words (its job's ``model``).
ZOO_NET = {"hidden": [256, 256], "activation": "relu", "log_std_init": -2.0}


def _zoo_policy() -> dict[str, Any]:
    """``ZOO_NET`` in SB3's words."""
    return {"log_std_init": ZOO_NET["log_std_init"], "ortho_init": False,
            "activation_fn": torch.nn.ReLU,
            "net_arch": {"pi": ZOO_NET["hidden"], "vf": ZOO_NET["hidden"]}}


# The zoo's Hopper entry, in SB3's words (RLlib's side reads them too).
ZOO_HOPPER = {"n_steps": 512, "batch_size": 32, "n_epochs": 5, "learning_rate": 9.80828e-5,
              "gamma": ZOO_HOPPER_GAMMA, "gae_lambda": 0.99, "clip_range": 0.2,
              "ent_coef": 0.00229519, "vf_coef": 0.835671, "max_grad_norm": 0.7}


def _sb3_ppo_hopper(env: VecEnv, seed: int, cap: int) -> BaseAlgorithm:
    return PPO("MlpPolicy", env, **ZOO_HOPPER, policy_kwargs=_zoo_policy(), seed=seed,
               device="cpu")


# The zoo's HalfCheetah entry, in SB3's words; faasrl's job says the same in its own.
ZOO_HALFCHEETAH = {"n_steps": 512, "batch_size": 64, "n_epochs": 20, "learning_rate": 2.0633e-5,
                   "gamma": ZOO_HALFCHEETAH_GAMMA, "gae_lambda": 0.92, "clip_range": 0.1,
                   "ent_coef": 0.000401762, "vf_coef": 0.58096, "max_grad_norm": 0.8}
HALFCHEETAH_JOB = Path(__file__).parent.parent / "examples" / "halfcheetah-ppo.yaml"


def _sb3_ppo_halfcheetah(env: VecEnv, seed: int, cap: int) -> BaseAlgorithm:
    return PPO("MlpPolicy", env, **ZOO_HALFCHEETAH, policy_kwargs=_zoo_policy(), seed=seed,
               device="cpu")


def _faasrl_halfcheetah() -> tuple[int, dict[str, Any]]:
    """The example job's actors and what of it the bench runs (its rollout and
    hyper-parameters), checked to be the zoo's entry: each actor's one env takes the zoo's
    n_steps, and a round's batch is cut into minibatches of the zoo's size. Its network is the
    zoo's, less the orthogonal-init switch (faasrl's init is CleanRL's orthogonal one)."""
    spec = load_yaml(HALFCHEETAH_JOB.read_text())
    zoo, hp, actors = ZOO_HALFCHEETAH, spec["hyperparameters"], spec["controller"]["actors"]
    ours = {"n_steps": spec["steps_per_actor"] * spec["envs_per_actor"],
            "batch_size": actors * spec["steps_per_actor"] // hp["num_minibatches"],
            "n_epochs": hp["update_epochs"], "learning_rate": hp["learning_rate"],
            "gamma": hp["gamma"], "gae_lambda": hp["gae_lambda"], "clip_range": hp["clip_coef"],
            "ent_coef": hp["ent_coef"], "vf_coef": hp["vf_coef"],
            "max_grad_norm": hp["max_grad_norm"]}
    if ours != zoo or hp["model"] != ZOO_NET:
        raise SystemExit(f"{HALFCHEETAH_JOB} is not the zoo's HalfCheetah entry: {ours}")
    return actors, {k: spec[k] for k in ("envs_per_actor", "steps_per_actor", "hyperparameters")}


def _sb3_sac_hopper(env: VecEnv, seed: int, cap: int) -> BaseAlgorithm:
    return SAC("MlpPolicy", env, learning_starts=10_000, seed=seed, device="cpu")


HALFCHEETAH_ACTORS, HALFCHEETAH_RUN = _faasrl_halfcheetah()
TASKS = {
    "ppo": Task("ppo", "PPO Hopper-v5 to 2,000", "Hopper-v5", "ppo", 2_000.0, check_every=512,
                max_env_steps=1_000_000, quick_env_steps=8_192, sb3=_sb3_ppo_hopper,
                normalize=True, gamma=ZOO_HOPPER_GAMMA),
    "ppo-halfcheetah": Task("ppo-halfcheetah", "PPO HalfCheetah-v5 to 3,000", "HalfCheetah-v5",
                            "ppo", 3_000.0, check_every=512, max_env_steps=1_000_000,
                            quick_env_steps=8_192, sb3=_sb3_ppo_halfcheetah, normalize=True,
                            gamma=ZOO_HALFCHEETAH_GAMMA, actors=HALFCHEETAH_ACTORS,
                            job=HALFCHEETAH_RUN),
    "sac": Task("sac", "SAC Hopper-v5 to 2,000", "Hopper-v5", "sac", 2_000.0, check_every=1_000,
                max_env_steps=1_000_000, quick_env_steps=2_000, sb3=_sb3_sac_hopper),
}
MAX_WALL_S, QUICK_WALL_S = 3600.0, 300.0
REPO = Path(__file__).resolve().parents[1]
RLLIB_PYTHON = REPO / ".venv-rllib" / "bin" / "python"  # make rllib-env
RLLIB_ZOO = {"ppo": ZOO_HOPPER, "ppo-halfcheetah": ZOO_HALFCHEETAH}  # the tasks it runs


def rllib_run(task: Task, seed: int, steps: int, wall: float) -> dict[str, Any]:
    """RLlib's PPO with the task's zoo entry (``rllib_ppo.py``, in its own environment)."""
    spec = {"env_id": task.env_id, "seed": seed, "target": task.target, "window": WINDOW,
            "episodes": EVAL_EPISODES, "confirm_gap": CONFIRM_GAP, "max_env_steps": steps,
            "max_wall_s": wall, "log_std_init": ZOO_NET["log_std_init"],
            "hidden": ZOO_NET["hidden"], "activation": ZOO_NET["activation"],
            "zoo": RLLIB_ZOO[task.name]}
    # The bench folder is the script's; the platform's, for the evaluation seeds alone.
    env = {**os.environ, "PYTHONPATH": str(REPO / "platform")}
    done = subprocess.run([str(RLLIB_PYTHON), str(REPO / "bench" / "rllib_ppo.py"),
                           json.dumps(spec)], env=env, capture_output=True, text=True,
                          timeout=wall + 600, check=False)
    if done.returncode:
        raise RuntimeError(f"RLlib's run failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_options(parser, "the first seed only, a few thousand env steps: does it all run?")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=["ppo"])
    parser.add_argument("--max-env-steps", type=int, help="lower every task's env-step cap")
    parser.add_argument("--max-wall-s", type=float, help="lower the wall cap of every run")
    parser.add_argument("--rllib", action="store_true",
                        help="RLlib's PPO as a third side of the PPO tasks (make rllib-env)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/mujoco_peers.json"))
    args = parser.parse_args()
    if args.rllib and not RLLIB_PYTHON.exists():
        parser.error(f"--rllib: {RLLIB_PYTHON} is missing: run make rllib-env")
    if args.rllib and (others := set(args.tasks) - set(RLLIB_ZOO)):
        parser.error(f"--rllib runs the PPO tasks only, not {sorted(others)}")
    seeds = peer_seeds(args)
    console = Console()
    results: dict[str, Any] = {"seeds": seeds, "quick": args.quick}
    for name in args.tasks:  # results are written after each task: a later failure keeps them
        task = TASKS[name]
        steps = task.quick_env_steps if args.quick else args.max_env_steps or task.max_env_steps
        wall = QUICK_WALL_S if args.quick else args.max_wall_s or MAX_WALL_S
        peers = {"rllib": rllib_run} if args.rllib else {}
        results[name] = compare(task, seeds, steps, wall, console, peers)
        write_results(args.out, results)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
