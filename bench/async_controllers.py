"""Stellaris against synchronous PPO, asynchronous PPO (async, softsync, SSP) and IMPACT.

Every variant runs the same rounds on the same actors (``--actors`` actor functions, each
rolling out ``envs x steps`` per round), so every run samples the same env steps; what differs
is how learning happens:

- ``ppo-sync``: the synchronous driver, one PPO learner per round (epochs x minibatches);
- ``stellaris``: as the authors run it (the async defaults): asynchronous PPO learners
  (``--learners`` at most) making 10 passes over the round's batch cut into 4 slices, each
  gradient its own Adam step, Stellaris' staleness-aware aggregation (d 0.96, v 3) and the
  authors' importance-sampling truncation (ρ 1.0);
- ``stellaris-paper``: the paper read literally: one gradient per batch, one Adam step on the
  weighted mean of an aggregation, the paper's truncation;
- ``async``, ``softsync``, ``ssp``: the authors' passes (as ``stellaris``) without truncation,
  aggregated by the baselines the paper compares against: every gradient applied as it arrives;
  every K = 4 gradients (Zhang et al.); no gradient staler than s = 2 (stale synchronous
  parallel);
- ``impact``: asynchronous IMPACT learners (V-trace, target network), one gradient per batch,
  every gradient applied as it arrives.

Reported per env and variant, over the seeds: the final evaluation's mean return
(deterministic policy, held-out seeds), the measured wall time and cost (actors as Lambda,
learner and parameter functions as shares of a p3.2xlarge), the modeled-parallel wall time and
cost (no invocation waits for a core: ``faasrl.jobs.parallel``), the training return at equal
modeled time and at equal modeled cost (the smallest variant's mean), actor-seconds, the mean
staleness of the aggregated gradients, and the ratios against ``ppo-sync`` measured in the same
run (the paper's headline figures are such ratios). Writes JSON and a plot of return against
modeled time to bench/results/.

    python bench/async_controllers.py                 # CartPole-v1 and Hopper-v5, seeds 1-3
    python bench/async_controllers.py --quick         # a tiny configuration: does it all run?
    python bench/async_controllers.py --virtual-cores 16 \
        --calibration bench/calibrations/CartPole-v1-16cores.json    # see below

With ``--virtual-cores N`` the asynchronous variants run on a virtual clock of N cores
(``clock: virtual``, docs/virtual-clock.md) with the calibration ``bench/calibrate.py`` wrote:
what N real cores would learn, whatever this machine's cores. Their modeled time is then the
virtual clock's (each round's ``virtual_s``, summed), which the equal-time returns use; the
synchronous variant keeps its modeled-parallel time, measured on the same calibrated machine.

Runs split over machines or cores (each part its own ``--out``) are put back together with
``--merge part1.json part2.json ... --out all.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from jobrun import (
    actor_seconds,
    add_virtual_options,
    curves,
    equal_budget_returns,
    run_job,
    virtual_cluster,
    virtual_time,
    write_results,
)
from rich.console import Console
from rich.table import Table

from faasrl import round_row as rr

RESULTS = Path(__file__).resolve().parent / "results" / "async_controllers.json"
# The paper read literally: one gradient per actor batch, one Adam step per aggregation.
ONE_GRADIENT = {"sgd_iters": 1, "learner_slices": None, "optimizer_step": "weighted_mean"}
VARIANTS: dict[str, dict[str, Any]] = {
    "ppo-sync": {"algorithm": "ppo", "execution": "sync"},
    "stellaris": {"algorithm": "ppo", "execution": "async",
                  "hyperparameters": {"truncation": "artifact", "rho": 1.0},
                  "asynchronous": {"aggregation": {"rule": "stellaris", "decay": 0.96,
                                                   "root": 3.0},
                                   "sgd_iters": 10, "learner_slices": 4,
                                   "optimizer_step": "per_gradient"}},
    "stellaris-paper": {"algorithm": "ppo", "execution": "async",
                        "hyperparameters": {"truncation": "paper", "rho": 1.0},
                        "asynchronous": {"aggregation": {"rule": "stellaris", "decay": 0.96,
                                                         "root": 3.0},
                                         **ONE_GRADIENT}},
    "async": {"algorithm": "ppo", "execution": "async",
              "hyperparameters": {"truncation": "off"},
              "asynchronous": {"aggregation": {"rule": "async"}}},
    "softsync": {"algorithm": "ppo", "execution": "async",
                 "hyperparameters": {"truncation": "off"},
                 "asynchronous": {"aggregation": {"rule": "softsync", "k": 4}}},
    "ssp": {"algorithm": "ppo", "execution": "async",
            "hyperparameters": {"truncation": "off"},
            "asynchronous": {"aggregation": {"rule": "ssp", "s": 2}}},
    "impact": {"algorithm": "impact", "execution": "async",
               "asynchronous": {"aggregation": {"rule": "async"}, **ONE_GRADIENT}},
}
# Per env: envs x steps per actor and rounds (Hopper: 1,024 steps per actor as in the paper;
# 30 rounds rather than its 50, so that 12 Hopper jobs fit in about 15 minutes on 2 cores).
ENVS: dict[str, dict[str, int]] = {
    "CartPole-v1": {"envs_per_actor": 4, "steps_per_actor": 128, "rounds": 60},
    "Hopper-v5": {"envs_per_actor": 1, "steps_per_actor": 1024, "rounds": 30},
}
QUICK: dict[str, dict[str, int]] = {
    "CartPole-v1": {"envs_per_actor": 2, "steps_per_actor": 16, "rounds": 3},
    "Hopper-v5": {"envs_per_actor": 1, "steps_per_actor": 32, "rounds": 2},
}


def job_spec(env_id: str, variant: str, seed: int, sizes: dict[str, int], *, actors: int,
             learners: int, eval_episodes: int, virtual: dict[str, Any] | None = None,
             env_backend: str | None = None) -> dict[str, Any]:
    """The job of one run; ``virtual``: the virtual clock's cluster, for async variants;
    ``env_backend``: what steps the envs (None: the platform's default for the env)."""
    spec: dict[str, Any] = {
        "name": f"{variant}-{env_id}-{seed}", "env_id": env_id, "seed": seed,
        "controller": {"name": "fixed", "actors": actors},
        "envs_per_actor": sizes["envs_per_actor"], "steps_per_actor": sizes["steps_per_actor"],
        "stop": {"max_rounds": sizes["rounds"]}, "evaluation_episodes": eval_episodes,
        **VARIANTS[variant]}
    if env_backend is not None:
        spec["env_backend"] = env_backend
    if spec["execution"] == "async":
        spec["asynchronous"] = {**spec.get("asynchronous", {}), "max_learners": learners}
        if virtual is not None:
            spec.update(clock="virtual", virtual=virtual)
    return spec


def one_run(spec: dict[str, Any], label: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    job, rows = run_job(spec, label=label, timeout_s=3 * 3600)
    weights = [(r[rr.STALENESS_MEAN], r[rr.GRADIENTS_AGGREGATED]) for r in rows
               if r.get(rr.STALENESS_MEAN) is not None]
    aggregated = sum(n for _, n in weights)
    return {
        "final_return": job["evaluation"]["mean"] if job["evaluation"] else None,
        "training_return": job["last_row"][rr.RECENT_MEAN_RETURN],
        "cost_usd": job["cost_usd"], "serverful_cost_usd": job["serverful_cost_usd"],
        "staleness_mean": sum(s * n for s, n in weights) / aggregated if aggregated else None,
        "staleness_max": max((r[rr.STALENESS_MAX] for r in rows
                              if r.get(rr.STALENESS_MAX) is not None), default=None),
        "versions": job["version"], "env_steps": job["env_steps"], "rounds": job["round"],
        "wall_s": job["wall_s"], "run_s": time.perf_counter() - t0,
        # modeled, no waits for a core (jobs/parallel.py)
        "parallel_wall_s": job["parallel_wall_s"], "parallel_cost_usd": job["parallel_cost_usd"],
        "actor_s": actor_seconds(rows), **curves(rows), **virtual_time(rows),
    }


def _stats(values: list[float | None]) -> dict[str, float | None]:
    xs = [v for v in values if v is not None]
    if not xs:
        return {"mean": None, "std": None}
    return {"mean": statistics.fmean(xs), "std": statistics.pstdev(xs) if len(xs) > 1 else 0.0}


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    equal_budget_returns(runs, "variant", env_key="env_id")
    rows = []
    for env_id in dict.fromkeys(r["env_id"] for r in runs):
        base = [r for r in runs if r["env_id"] == env_id and r["variant"] == "ppo-sync"]
        base_return = _stats([r["final_return"] for r in base])["mean"]
        base_cost = _stats([r["cost_usd"] for r in base])["mean"]
        for variant in dict.fromkeys(r["variant"] for r in runs if r["env_id"] == env_id):
            mine = [r for r in runs if r["env_id"] == env_id and r["variant"] == variant]
            ret, cost = _stats([r["final_return"] for r in mine]), _stats(
                [r["cost_usd"] for r in mine])
            rows.append({
                "env_id": env_id, "variant": variant, "seeds": len(mine),
                "final_return": ret, "cost_usd": cost,
                "staleness_mean": _stats([r["staleness_mean"] for r in mine])["mean"],
                **{k: _stats([r[k] for r in mine])["mean"]
                   for k in ("wall_s", "parallel_wall_s", "parallel_cost_usd", "actor_s",
                             "return_at_equal_time", "return_at_equal_cost")},
                "return_vs_ppo_sync": (ret["mean"] / base_return
                                       if base_return and ret["mean"] is not None else None),
                "cost_vs_ppo_sync": (cost["mean"] / base_cost
                                     if base_cost and cost["mean"] is not None else None),
            })
    return rows


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--learners", type=int, default=4, help="max concurrent learners")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, help="override every env's round count")
    parser.add_argument("--quick", action="store_true",
                        help="tiny rollouts, 2-3 rounds, one seed: checks that everything runs")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: put these results together into --out")
    add_virtual_options(parser, "the async variants")
    parser.add_argument("--env-backend", choices=["envpool", "gymnasium"],
                        help="what steps the envs (default: the platform's for the env)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    virtual = virtual_cluster(parser, args)
    if args.merge:
        parts = [json.loads(p.read_text()) for p in args.merge]
        order = {v: i for i, v in enumerate(VARIANTS)}
        runs = sorted((run for part in parts for run in part["runs"]),
                      key=lambda r: (r["env_id"], order[r["variant"]], r["seed"]))
        report({**parts[0], "quick": any(p["quick"] for p in parts),
                "parts": [str(p) for p in args.merge],
                "sizes": {k: v for p in parts for k, v in p["sizes"].items()}, "runs": runs},
               args.out)
        return
    sizes = QUICK if args.quick else ENVS
    if args.rounds:
        sizes = {e: {**s, "rounds": args.rounds} for e, s in sizes.items()}
    seeds = args.seeds[:1] if args.quick else args.seeds
    eval_episodes = 2 if args.quick else args.eval_episodes

    runs = []
    for env_id in args.envs:
        for seed in seeds:  # seeds outermost per env: drift on the machine hits every variant
            for variant in args.variants:
                spec = job_spec(env_id, variant, seed, sizes[env_id], actors=args.actors,
                                learners=args.learners, eval_episodes=eval_episodes,
                                virtual=virtual, env_backend=args.env_backend)
                result = one_run(spec, f"{env_id} {variant} seed {seed}")
                runs.append({"env_id": env_id, "variant": variant, "seed": seed, **result})
    report({"benchmark": "async_controllers", "quick": args.quick, "actors": args.actors,
            "learners": args.learners, "virtual": virtual,
            "sizes": {e: sizes[e] for e in args.envs}, "runs": runs},
           args.out)


def report(results: dict[str, Any], out: Path) -> None:
    """The table and the JSON of a set of runs."""
    summary = summarize(results["runs"])

    table = Table("env", "variant", "final return", "cost $", "vs PPO: return", "cost",
                  "staleness", "wall s", "modeled wall s", "modeled cost $", "actor-s",
                  "return @ equal modeled time", "@ equal modeled cost",
                  title="Stellaris vs PPO, async PPO, IMPACT (modeled: no waits for a core)")
    for row in summary:
        ret, cost = row["final_return"], row["cost_usd"]
        table.add_row(row["env_id"], row["variant"],
                      f"{_fmt(ret['mean'])} ± {_fmt(ret['std'])}", _fmt(cost["mean"], 4),
                      _fmt(row["return_vs_ppo_sync"], 2) + "x",
                      _fmt(row["cost_vs_ppo_sync"], 2) + "x",
                      _fmt(row["staleness_mean"], 2), _fmt(row["wall_s"]),
                      _fmt(row["parallel_wall_s"]), _fmt(row["parallel_cost_usd"], 4),
                      _fmt(row["actor_s"]), _fmt(row["return_at_equal_time"]),
                      _fmt(row["return_at_equal_cost"]))
    Console(width=220).print(table)
    plot(results["runs"], out.with_suffix(".png"))
    write_results(out, {**results, "summary": summary})
    print(f"wrote {out} and {out.with_suffix('.png')}")


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Training return against modeled-parallel time and cost, per env."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env_id"] for r in runs))
    fig, axes = plt.subplots(2, len(envs), figsize=(6 * len(envs), 8), squeeze=False)
    colors = {v: f"C{i}" for i, v in enumerate(VARIANTS)}
    first_seed = min(r["seed"] for r in runs)
    for col, env in enumerate(envs):
        for r in (r for r in runs if r["env_id"] == env):
            label = r["variant"] if r["seed"] == first_seed else None
            for ax, curve in ((axes[0][col], r["parallel_curve"]),
                              (axes[1][col], r["parallel_cost_curve"])):
                ax.plot([x for x, y in curve if y is not None],
                        [y for _, y in curve if y is not None],
                        color=colors[r["variant"]], alpha=0.7, label=label)
        axes[0][col].set(title=f"{env}: training return (modeled: no waits for a core)",
                         xlabel="modeled-parallel s", ylabel="mean return")
        axes[1][col].set(title=f"{env}: training return against modeled cost",
                         xlabel="modeled-parallel USD", ylabel="mean return")
        axes[0][col].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
