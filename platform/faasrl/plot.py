"""Learning curves of a job: return vs env steps and vs wall time (measured, and modeled
parallel: ``jobs/parallel.py``), actors per round, cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from faasrl import round_row as rr


def plot_job(job: dict[str, Any], rows: list[dict[str, Any]], out: Path) -> Path:
    """Write a 2x2 figure of the job's metrics rows to ``out`` (PNG, PDF or SVG)."""
    steps = [r[rr.TOTAL_ENV_STEPS] for r in rows]
    wall = [r[rr.WALL_S] for r in rows]
    parallel = [r.get(rr.PARALLEL_WALL_S) for r in rows]  # rows from before the model: none
    recent = [r[rr.RECENT_MEAN_RETURN] for r in rows]
    rounds = [r[rr.ROUND] for r in rows]
    fig, ax = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    target = job["spec"]["stop"].get("target_reward")
    for axis, x, label in ((ax[0, 0], steps, "env steps"), (ax[0, 1], wall, "wall time (s)")):
        axis.plot(x, recent, label=f"mean of last {job['spec']['stop']['target_window']}")
        axis.scatter(x, [r[rr.MEAN_RETURN] for r in rows], s=6, alpha=0.4, label="round mean")
        if target is not None:
            axis.axhline(target, color="grey", linestyle="--", linewidth=1, label="target")
        axis.set_xlabel(label)
        axis.set_ylabel("episode return")
    if None not in parallel:
        ax[0, 1].plot(parallel, recent, linestyle=":", label="vs modeled-parallel time")
    for axis in (ax[0, 0], ax[0, 1]):
        axis.legend(loc="lower right", fontsize=8)
    ax[1, 0].step(rounds, [r[rr.ACTORS] for r in rows], where="post")
    ax[1, 0].set_xlabel("round")
    ax[1, 0].set_ylabel("actors")
    ax[1, 1].plot(wall, [r[rr.COST_TOTAL] for r in rows], label="serverless")
    ax[1, 1].plot(wall, [r[rr.SERVERFUL_COST_TOTAL] for r in rows], label="serverful")
    if None not in parallel:
        ax[1, 1].plot(wall, [r[rr.PARALLEL_COST_TOTAL] for r in rows],
                      label="serverless, modeled parallel")
    ax[1, 1].set_xlabel("wall time (s)")
    ax[1, 1].set_ylabel("cumulative cost (USD)")
    ax[1, 1].legend(fontsize=8)
    fig.suptitle(f"{job['spec'].get('name') or job['id']}: {job['spec']['algorithm'].upper()} on "
                 f"{job['spec']['env_id']} ({job['status']})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
