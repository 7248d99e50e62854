"""Actor-scaling controllers under the same budget: fixed, minions, minions-adapt, minions-max,
nitro, kungfu, hydrozoa, on CartPole-v1 and Hopper-v5, several seeds.

Every run is a whole job on a fresh embedded platform with the same stop conditions per env (a
target reward, a budget in USD, a round cap and a wall-time cap), so a controller that spends
faster stops earlier. The MinionsRL scheduler is trained first — on the simulated workload, then
(CartPole) fine-tuned on whole jobs of the env — and its training time and cost are reported
beside the runs (the paper leaves them out). Reported per env and controller (mean ± std over
seeds): final return (the job's closing evaluation), wall time, cost, actor-seconds (billed actor
time), rounds, and Nitro's Hessian overhead as a share of round time (target < 5 %); wall time
and cost also as ratios to the fixed baseline of the same run. Writes JSON and a plot to
bench/results/.

    python bench/controllers.py                     # full: both envs, seeds 1 2 3
    python bench/controllers.py --quick             # tiny configuration, a minute or two
    python bench/controllers.py --envs CartPole-v1 --virtual-cores 16 \
        --calibration bench/calibrations/CartPole-v1-16cores.json   # see below

With ``--virtual-cores N`` every job runs on a virtual clock of N cores (``clock: virtual``,
docs/virtual-clock.md) with the calibration ``bench/calibrate.py`` wrote: each round's actors
are list-scheduled on the N cores at their calibrated durations, then its learner. What a
synchronous job learns does not depend on timing, but its time and cost do: the modeled time
and cost are then the virtual clock's (the rounds' ``virtual_s`` and ``virtual_cost_round``,
summed), which the ratios to the fixed baseline and the equal-time and equal-cost returns use.
The budget and wall-time stops are the virtual clock's too (the modeled cluster's cost and
time), and MinionsRL's state and Nitro's budget cap read the virtual figures.

Runs split over machines or cores (``--controllers``/``--seeds`` per part, each its own
``--out``) are put back together with ``--merge part1.json part2.json ... --out all.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from jobrun import (
    actor_seconds,
    add_virtual_options,
    curves,
    equal_budget_returns,
    run_job,
    virtual_cluster,
    virtual_cost,
    virtual_time,
    write_results,
)
from rich.console import Console
from rich.table import Table

from faasrl import round_row as rr
from faasrl.config import Settings
from faasrl.controllers.saved_schedulers import save_scheduler
from faasrl.embedded import EmbeddedPlatform
from faasrl.jobs.store import reached_target
from faasrl.scheduler_training.train import (
    SchedulerTrainer,
    TrainingConfig,
    job_episodes,
    simulated_episodes,
)
from faasrl.scheduler_training.workload import SimulatedWorkload

CONTROLLERS = ("fixed", "minions", "minions-adapt", "minions-max", "nitro", "kungfu", "hydrozoa")
# Per env: the job (same for every controller but its controller section), I_max for a 2-core
# machine, the fixed baseline's count, Nitro's Hessian subset (samples, Lanczos steps), and the
# scheduler's fine-tuning: episodes (whole jobs) and their round cap.
ENVS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "job": {"env_id": "CartPole-v1", "envs_per_actor": 4, "steps_per_actor": 128,
                "evaluation_episodes": 20,
                "stop": {"target_reward": 475, "budget_usd": 0.003, "max_rounds": 300,
                         "max_wall_s": 300}},
        # 10 Lanczos steps, as for Hopper: with 20, the Hessian took 14 % of CartPole's short
        # rounds (one actor, about 0.17 s), far over Nitro's 5 % bound.
        "i_max": 8, "fixed": 2, "hessian": (512, 10),
        "job_episodes": 5, "tune_rounds": 60},
    "Hopper-v5": {
        "job": {"env_id": "Hopper-v5", "evaluation_episodes": 10,
                "stop": {"target_reward": 1500, "budget_usd": 0.05, "max_rounds": 200,
                         "max_wall_s": 90}},
        # 10 Lanczos steps: 20 took 5.9 % of Hopper's round time, over Nitro's 5 % bound.
        # No fine-tuning jobs: at 90 s each they would double the bench on 2 cores.
        "i_max": 8, "fixed": 2, "hessian": (1024, 10), "job_episodes": 0, "tune_rounds": 20},
}
QUICK = {"envs_per_actor": 2, "steps_per_actor": 32, "evaluation_episodes": 2,
         "stop": {"target_reward": 475, "budget_usd": 0.003, "max_rounds": 3, "max_wall_s": 120}}


def controller_spec(name: str, env: dict[str, Any], scheduler: str) -> dict[str, Any]:
    i_max = env["i_max"]
    samples, iterations = env["hessian"]
    return {
        "fixed": {"name": "fixed", "actors": env["fixed"]},
        "minions": {"name": "minions", "scheduler": scheduler},
        "minions-adapt": {"name": "minions-adapt", "max_actors": i_max},
        "minions-max": {"name": "minions-max", "max_actors": i_max},
        "nitro": {"name": "nitro", "min_actors": 1, "max_actors": i_max,
                  "hessian_samples": samples, "hessian_iterations": iterations},
        "kungfu": {"name": "kungfu", "min_actors": 1, "max_actors": i_max},
        "hydrozoa": {"name": "hydrozoa", "start": 1, "every": 10, "max_actors": i_max},
    }[name]


def train_scheduler(env_id: str, env: dict[str, Any], job: dict[str, Any], folder: Path,
                    name: str, sim_episodes: int, job_episodes_n: int,
                    console: Console) -> dict[str, Any]:
    """Simulated workload first (seconds), then whole jobs of the env; returns its cost."""
    torch.set_num_threads(1)
    stop = job["stop"]
    trainer = SchedulerTrainer(TrainingConfig(i_max=env["i_max"], beta=0.1, seed=0))
    with console.status(f"{env_id}: training the scheduler on the simulated workload"):
        trainer.train(simulated_episodes(SimulatedWorkload(), seed=0), sim_episodes)
    cost = 0.0
    t0 = time.perf_counter()
    if job_episodes_n == 0:  # the simulated workload only
        save_scheduler(folder, name, trainer.weights(), trainer.meta(trained_on="simulated"))
        return {"sim_episodes": sim_episodes, "job_episodes": 0,
                "wall_s": time.perf_counter() - t0, "cost_usd": 0.0}

    def add_cost(i: int, ep: Any, ret: float) -> None:
        nonlocal cost
        cost += ep.rows[-1]["cost_total"]
        console.print(f"  scheduler episode {i + 1}/{job_episodes_n}: return {ret:.3f}, "
                      f"{len(ep.rows)} rounds")

    tune = {**job, "evaluation_episodes": 0,
            "stop": {**stop, "max_rounds": min(stop["max_rounds"], env["tune_rounds"])}}
    with tempfile.TemporaryDirectory() as state, EmbeddedPlatform(
            Settings(state_dir=Path(state), port=0, schedulers_dir=folder)) as platform, \
            platform.client() as client:
        runner = job_episodes(client, tune, name, folder,
                              lambda: trainer.meta(trained_on=env_id))
        trainer.train(runner, job_episodes_n, add_cost)
    save_scheduler(folder, name, trainer.weights(), trainer.meta(trained_on=env_id))
    return {"sim_episodes": sim_episodes, "job_episodes": job_episodes_n,
            "wall_s": time.perf_counter() - t0, "cost_usd": cost}


def summarize(job: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    ev = job.get("evaluation")
    round_s = sum(r[rr.ROUND_S] for r in rows)
    hessian_s = sum(r.get(rr.HESSIAN_S) or 0.0 for r in rows)
    return {
        "final_return": ev["mean"] if ev else (rows[-1]["recent_mean_return"] if rows else None),
        "wall_s": job["wall_s"], "cost_usd": job["cost_usd"], "rounds": job["round"],
        "env_steps": job["env_steps"],
        # modeled: no invocation waits for a core (jobs/parallel.py), as on Lambda
        "parallel_wall_s": job["parallel_wall_s"], "parallel_cost_usd": job["parallel_cost_usd"],
        "actor_s": actor_seconds(rows),
        "nitro_overhead_pct": 100 * hessian_s / round_s if hessian_s else None,
        "reached": reached_target(job.get("stop_reason")),
        "stop_reason": job.get("stop_reason"), "actors": [r[rr.ACTORS] for r in rows],
        **curves(rows), **virtual_time(rows), **virtual_cost(rows),
    }


def _mean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.fmean(xs) if xs else None


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4g}"
    return f"{statistics.fmean(values):.4g} ± {statistics.stdev(values):.2g}"


def table(runs: list[dict[str, Any]], console: Console) -> dict[str, Any]:
    summary: dict[str, Any] = {"horizons": equal_budget_returns(runs, "controller")}
    t = Table("env", "controller", "final return", "wall s", "cost $", "actor-s", "rounds",
              "reached", "wall / fixed", "cost / fixed", "modeled wall / fixed",
              "modeled cost / fixed", "return @ equal modeled time", "@ equal modeled cost",
              "Nitro overhead %",
              title="controllers under the same budget (modeled: "
                    + ("the virtual clock's" if any(r.get("clock") == "virtual" for r in runs)
                       else "no waits for a core") + ")")
    for env in dict.fromkeys(r["env"] for r in runs):
        fixed = [r for r in runs if r["env"] == env and r["controller"] == "fixed"]
        base_wall = statistics.fmean(r["wall_s"] for r in fixed) if fixed else None
        base_cost = statistics.fmean(r["cost_usd"] for r in fixed) if fixed else None
        base_pwall = statistics.fmean(r["parallel_wall_s"] for r in fixed) if fixed else None
        base_pcost = statistics.fmean(r["parallel_cost_usd"] for r in fixed) if fixed else None
        for ctl in dict.fromkeys(r["controller"] for r in runs if r["env"] == env):
            rs = [r for r in runs if r["env"] == env and r["controller"] == ctl]
            wall = statistics.fmean(r["wall_s"] for r in rs)
            cost = statistics.fmean(r["cost_usd"] for r in rs)
            pwall = statistics.fmean(r["parallel_wall_s"] for r in rs)
            pcost = statistics.fmean(r["parallel_cost_usd"] for r in rs)
            overhead = [r["nitro_overhead_pct"] for r in rs if r["nitro_overhead_pct"]]
            summary[f"{env}/{ctl}"] = {
                "final_return": statistics.fmean(r["final_return"] for r in rs
                                                 if r["final_return"] is not None)
                if any(r["final_return"] is not None for r in rs) else None,
                "wall_s": wall, "cost_usd": cost,
                "actor_s": statistics.fmean(r["actor_s"] for r in rs),
                "reached": sum(r["reached"] for r in rs), "seeds": len(rs),
                "wall_over_fixed": wall / base_wall if base_wall else None,
                "cost_over_fixed": cost / base_cost if base_cost else None,
                "parallel_wall_s": pwall, "parallel_cost_usd": pcost,
                "parallel_wall_over_fixed": pwall / base_pwall if base_pwall else None,
                "parallel_cost_over_fixed": pcost / base_pcost if base_pcost else None,
                **{k: _mean([r[k] for r in rs])
                   for k in ("return_at_equal_time", "return_at_equal_cost")},
                "nitro_overhead_pct": statistics.fmean(overhead) if overhead else None}
            s = summary[f"{env}/{ctl}"]
            t.add_row(env, ctl, _mean_std([r["final_return"] for r in rs
                                           if r["final_return"] is not None]),
                      _mean_std([r["wall_s"] for r in rs]),
                      _mean_std([r["cost_usd"] for r in rs]),
                      _mean_std([r["actor_s"] for r in rs]),
                      _mean_std([r["rounds"] for r in rs]), f"{s['reached']}/{len(rs)}",
                      "-" if s["wall_over_fixed"] is None else f"{s['wall_over_fixed']:.2f}x",
                      "-" if s["cost_over_fixed"] is None else f"{s['cost_over_fixed']:.2f}x",
                      *("-" if s[k] is None else f"{s[k]:.2f}x"
                        for k in ("parallel_wall_over_fixed", "parallel_cost_over_fixed")),
                      *(_mean_std([r[k] for r in rs if r[k] is not None])
                        for k in ("return_at_equal_time", "return_at_equal_cost")),
                      "-" if s["nitro_overhead_pct"] is None
                      else f"{s['nitro_overhead_pct']:.1f}")
    console.print(t)
    return summary


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in runs))
    fig, axes = plt.subplots(3, len(envs), figsize=(6 * len(envs), 12), squeeze=False)
    colors = {c: f"C{i}" for i, c in enumerate(CONTROLLERS)}
    for col, env in enumerate(envs):
        curve_ax, modeled_ax, actors_ax = (axes[row][col] for row in range(3))
        for r in (r for r in runs if r["env"] == env):
            label = r["controller"] if r["seed"] == min(q["seed"] for q in runs) else None
            for ax, curve in ((curve_ax, r["curve"]), (modeled_ax, r["parallel_curve"])):
                ax.plot([x for x, y in curve if y is not None],
                        [y for _, y in curve if y is not None],
                        color=colors[r["controller"]], alpha=0.7, label=label)
            actors_ax.plot(r["actors"], color=colors[r["controller"]], alpha=0.7, label=label)
        curve_ax.set(title=f"{env}: training return", xlabel="wall s", ylabel="mean return")
        modeled_ax.set(title=f"{env}: training return (modeled: no waits for a core)",
                       xlabel="modeled-parallel s", ylabel="mean return")
        actors_ax.set(title=f"{env}: actors per round", xlabel="round", ylabel="actors")
        curve_ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--controllers", nargs="+", default=list(CONTROLLERS),
                        choices=CONTROLLERS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sim-episodes", type=int, default=200,
                        help="scheduler episodes on the simulated workload")
    parser.add_argument("--job-episodes", type=int,
                        help="scheduler fine-tuning episodes on whole jobs of the env "
                             "(default: the env's, 5 for CartPole, 0 for Hopper)")
    parser.add_argument("--quick", action="store_true",
                        help="CartPole only, seed 1, 3 tiny rounds: checks the script works")
    parser.add_argument("--max-wall-s", type=float,
                        help="override every env's wall-time cap per job")
    parser.add_argument("--rounds", type=int, help="override every env's round cap")
    add_virtual_options(parser, "every job")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: put these results together into --out")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bench/results/controllers.json"))
    args = parser.parse_args()
    if args.quick:
        args.envs, args.seeds, args.sim_episodes, args.job_episodes = ["CartPole-v1"], [1], 20, 1
    virtual = virtual_cluster(parser, args)
    console = Console(width=220)
    if args.merge:
        merge(args.merge, args.out, console, plot_too=not args.no_plot)
        return
    envs = {e: ENVS[e] for e in args.envs}
    stop: dict[str, Any] = {}
    if args.max_wall_s:
        stop["max_wall_s"] = args.max_wall_s
    if args.rounds:
        stop["max_rounds"] = args.rounds
    runs: list[dict[str, Any]] = []
    schedulers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        for env_id, env in envs.items():
            job = {**env["job"], **QUICK} if args.quick else env["job"]
            job = {**job, "stop": {**job["stop"], **stop}}
            if virtual is not None:
                job.update(clock="virtual", virtual=virtual)
            name = f"bench-{env_id.lower()}"
            if "minions" in args.controllers:
                episodes = (env["job_episodes"] if args.job_episodes is None
                            else args.job_episodes)
                schedulers[env_id] = train_scheduler(env_id, env, job, folder, name,
                                                     args.sim_episodes, episodes, console)
            for seed in args.seeds:  # interleaved, so drift hits every controller alike
                for ctl in args.controllers:
                    spec = {**job, "seed": seed,
                            "controller": controller_spec(ctl, env, name)}
                    done, rows = run_job(spec, label=f"{env_id} {ctl} seed {seed}",
                                         schedulers_dir=folder)
                    runs.append({"env": env_id, "controller": ctl, "seed": seed,
                                 **summarize(done, rows)})
                    r = runs[-1]
                    console.print(f"{env_id} {ctl:>13} seed {seed}: return "
                                  f"{r['final_return']}, wall {r['wall_s']:.1f} s, cost "
                                  f"${r['cost_usd']:.5f}, {r['stop_reason']}")
    report({"quick": args.quick, "virtual": virtual, "stop": stop, "envs": envs, "runs": runs,
            "schedulers": schedulers},
           args.out, console, plot_too=not args.no_plot)


def report(results: dict[str, Any], out: Path, console: Console, *, plot_too: bool) -> None:
    """The table, the plot and the JSON of a set of runs."""
    results["summary"] = table(results["runs"], console)
    for env_id, s in results["schedulers"].items():
        console.print(f"MinionsRL scheduler for {env_id}: {s['sim_episodes']} simulated + "
                      f"{s['job_episodes']} job episodes, {s['wall_s']:.0f} s, "
                      f"${s['cost_usd']:.5f} (not in the runs' costs)")
    if plot_too:
        plot(results["runs"], out.with_suffix(".png"))
    write_results(out, results)
    console.print(f"wrote {out}" + (f" and {out.with_suffix('.png')}" if plot_too else ""))


def merge(parts: list[Path], out: Path, console: Console, *, plot_too: bool) -> None:
    """Results of runs split over machines or cores, as if they were one run."""
    loaded = [json.loads(p.read_text()) for p in parts]
    results = {"quick": any(r["quick"] for r in loaded), "parts": [str(p) for p in parts],
               "envs": {k: v for r in loaded for k, v in r["envs"].items()},
               "runs": [run for r in loaded for run in r["runs"]],
               "schedulers": {k: v for r in loaded for k, v in r["schedulers"].items()}}
    order = {c: i for i, c in enumerate(CONTROLLERS)}
    results["runs"].sort(key=lambda r: (r["env"], order[r["controller"]], r["seed"]))
    report(results, out, console, plot_too=plot_too)


if __name__ == "__main__":
    main()
