"""PPO on CartPole-v1 to 475: faasrl (two actor functions + a learner) against Stable-Baselines3.

Both run the same PPO configuration, the one ``examples/cartpole.yaml`` (``make run``) uses:
8 envs in all x 128 steps per update, 4 epochs of 4 minibatches, lr 1e-3 annealed over 300
updates, clip 0.2, no entropy bonus, 64x64 tanh actor and critic. Both stop by the same rule:
the mean of the last 20 training episodes reaches 475 and a deterministic evaluation of the
current policy (20 episodes on the job's confirmation seeds) confirms it; a failed
confirmation is retried 5 updates later. Reported per seed: wall time to the confirmed target
and the final evaluation (faasrl: the job's wall time, platform start excluded but its
containers' cold starts included; SB3: ``learn()`` and its final evaluation), env steps, the
final evaluation's mean on the held-out seeds (``faasrl.rl.seeds``: both sides play the same
per-episode seeds), and the time per update (faasrl: the rounds alone, so without the cold
starts and the evaluations; SB3: ``learn()`` over its updates).

    python bench/ppo_cartpole.py [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import torch
from jobrun import run_job, write_results
from rich.console import Console
from rich.table import Table
from sb3_ppo import sb3_run

from faasrl.jobs.store import reached_target
from faasrl.user_input import load_yaml

SPEC = Path(__file__).resolve().parents[1] / "examples" / "cartpole.yaml"


def faasrl_run(seed: int) -> dict[str, Any]:
    spec = {**load_yaml(SPEC.read_text()), "seed": seed}
    job, rows = run_job(spec, label=f"faasrl seed {seed}")
    return {"wall_s": job["wall_s"], "env_steps": job["env_steps"], "updates": job["round"],
            "update_ms": 1e3 * statistics.median(r["round_s"] for r in rows[1:]),
            "eval_mean": job["evaluation"]["mean"],
            "reached": reached_target(job.get("stop_reason"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sb3-threads", type=int, default=1,
                        help="torch threads for SB3 (1 is its fastest on a small MLP here)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/ppo_cartpole.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.sb3_threads)
    console = Console()
    runs: dict[str, list[dict[str, Any]]] = {"faasrl": [], "sb3": []}
    for seed in args.seeds:  # interleaved, so drift hits both alike
        runs["faasrl"].append({"seed": seed, **faasrl_run(seed)})
        with console.status(f"SB3 seed {seed}"):
            runs["sb3"].append({"seed": seed, **sb3_run(seed)})

    table = Table("system", "seed", "reached 475", "updates", "env steps", "wall s",
                  "ms/update", "eval mean", title="PPO CartPole-v1 to 475")
    for system, rows in runs.items():
        for r in rows:
            table.add_row(system, str(r["seed"]), "yes" if r["reached"] else "NO",
                          str(r["updates"]), f"{r['env_steps']:,}", f"{r['wall_s']:.1f}",
                          f"{r['update_ms']:.0f}",
                          "-" if r["eval_mean"] is None else f"{r['eval_mean']:.1f}")
    console.print(table)
    median = {s: {k: statistics.median(r[k] for r in rows)
                  for k in ("wall_s", "env_steps", "update_ms")} for s, rows in runs.items()}
    summary = {"median": median,
               "wall_ratio_faasrl_over_sb3": median["faasrl"]["wall_s"] / median["sb3"]["wall_s"],
               "steps_ratio_faasrl_over_sb3":
                   median["faasrl"]["env_steps"] / median["sb3"]["env_steps"],
               "update_time_ratio_faasrl_over_sb3":
                   median["faasrl"]["update_ms"] / median["sb3"]["update_ms"]}
    console.print(f"faasrl / SB3, medians: wall time "
                  f"{summary['wall_ratio_faasrl_over_sb3']:.2f}x, env steps "
                  f"{summary['steps_ratio_faasrl_over_sb3']:.2f}x, time per update "
                  f"{summary['update_time_ratio_faasrl_over_sb3']:.2f}x")
    write_results(args.out, {"runs": runs, "summary": summary})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
