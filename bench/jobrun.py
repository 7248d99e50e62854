"""Shared by the training benchmarks: run one job to its end on a fresh embedded platform."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from itertools import accumulate
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from faasrl import round_row as rr
from faasrl.backends.process import ZYGOTE_WAIT_S
from faasrl.client import Client
from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform


def run_job(spec: dict[str, Any], *, label: str, timeout_s: float = 1800,
            schedulers_dir: Path | None = None, functions: Iterable[dict[str, Any]] = ()
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The finished job and its metrics rows, on a fresh embedded platform with ``functions``
    (manifests) deployed beside the built-in ones; raises if it did not succeed.

    The job is submitted once the platform has started, its zygote's imports included (a
    platform serves many jobs; a library's ``learn()`` is timed after its imports too): its
    wall time is the job's. ``bench/cartpole_e2e.py`` times the whole command instead."""
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0, schedulers_dir=schedulers_dir)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            wait_for_zygote(client)
            for manifest in functions:
                client.deploy(manifest)
            return run_on(client, spec, label=label, timeout_s=timeout_s)


def run_on(client: Client, spec: dict[str, Any], *, label: str, timeout_s: float = 1800
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit ``spec`` to a running platform and follow it to its end, with a progress bar."""
    job = client.submit(spec)
    total = spec.get("stop", {}).get("max_rounds")
    columns = (TextColumn(f"{label:<28}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("rounds"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(label, total=total)
        deadline = time.monotonic() + timeout_s
        while (job := client.job(job["id"]))["status"] in ("pending", "running"):
            progress.update(task, completed=job["round"])
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label}: job still running after {timeout_s} s")
            time.sleep(0.2)
    if job["status"] != "succeeded":
        raise RuntimeError(f"{label}: job {job['status']}: {job.get('error')}")
    return job, client.job_metrics(job["id"])


def wait_for_zygote(client: Client, timeout_s: float = ZYGOTE_WAIT_S) -> None:
    """Until the process backend's zygote has done its imports (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while client.cluster().get("zygote") == "importing" and time.monotonic() < deadline:
        time.sleep(0.05)


def write_results(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "python": sys.version.split()[0]}, indent=2))


# ------------------------------------------------------------ comparing runs at equal budgets
Curve = list[tuple[float, float | None]]


def actor_seconds(rows: list[dict[str, Any]]) -> float:
    """Billed actor time: each round's mean actor run time times its actors that answered."""
    return sum((r[rr.ACTOR_S_MEAN] or 0.0) * (r[rr.ACTORS] - r.get(rr.ACTOR_FAILURES, 0))
               for r in rows)


def curves(rows: list[dict[str, Any]]) -> dict[str, Curve]:
    """The training return (the job's recent mean) against measured wall time, modeled-parallel
    wall time and modeled-parallel cost, one point per round."""
    return {name: [(r[x], r[rr.RECENT_MEAN_RETURN]) for r in rows]
            for name, x in (("curve", rr.WALL_S), ("parallel_curve", rr.PARALLEL_WALL_S),
                            ("parallel_cost_curve", rr.PARALLEL_COST_TOTAL))}


def add_virtual_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--virtual-cores N`` and ``--calibration JSON``: run ``what`` on a virtual clock."""
    parser.add_argument("--virtual-cores", type=int, metavar="N",
                        help=f"run {what} on a virtual clock of N cores")
    parser.add_argument("--calibration", type=Path, metavar="JSON",
                        help="bench/calibrate.py's output (with --virtual-cores)")


def virtual_cluster(parser: argparse.ArgumentParser, args: argparse.Namespace
                    ) -> dict[str, Any] | None:
    """The job spec's ``virtual`` block those options ask for; None: real time."""
    if not args.virtual_cores:
        return None
    if args.calibration is None:
        parser.error("--virtual-cores needs --calibration (bench/calibrate.py writes it)")
    return {"cores": args.virtual_cores,
            "calibration": json.loads(args.calibration.read_text())["calibration"]}


def virtual_time(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A run on the virtual clock: its modeled time is the clock's (the rounds' ``virtual_s``
    summed), in place of the modeled-parallel re-timing of what ran on this machine."""
    if not rows or rr.VIRTUAL_S not in rows[0]:
        return {"clock": "real"}
    ends = list(accumulate(r[rr.VIRTUAL_S] for r in rows))
    return {"clock": "virtual", "parallel_wall_s": ends[-1],
            "parallel_curve": [(t, r[rr.RECENT_MEAN_RETURN]) for t, r in zip(ends, rows,
                                                                           strict=True)]}


def virtual_cost(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A run on the virtual clock: its modeled cost is its invocations billed at their virtual
    durations (the rounds' ``virtual_cost_round`` summed)."""
    if not rows or rr.VIRTUAL_COST_ROUND not in rows[0]:
        return {}
    totals = list(accumulate(r[rr.VIRTUAL_COST_ROUND] for r in rows))
    return {"parallel_cost_usd": totals[-1],
            "parallel_cost_curve": [(c, r[rr.RECENT_MEAN_RETURN]) for c, r in zip(totals, rows,
                                                                               strict=True)]}


def return_at(curve: Curve, x: float) -> float | None:
    """The training return a run had by ``x``; a run that ended before ``x`` keeps its last."""
    seen = [y for t, y in curve if t <= x * (1 + 1e-9) and y is not None]
    return seen[-1] if seen else None


def equal_budget_returns(runs: list[dict[str, Any]], group: str, env_key: str = "env"
                         ) -> dict[str, Any]:
    """Per env, the horizons every group (controller or variant) reached on average — the
    smallest group mean of modeled-parallel wall time and of modeled cost — and each run's
    training return at them, written into the runs as ``return_at_equal_time``/``_cost``."""
    horizons: dict[str, Any] = {}
    for env in dict.fromkeys(r[env_key] for r in runs):
        mine = [r for r in runs if r[env_key] == env]
        groups = dict.fromkeys(r[group] for r in mine)

        def smallest(key: str, mine: list[dict[str, Any]] = mine,
                     groups: dict[str, None] = groups) -> float:
            return min(statistics.fmean(r[key] for r in mine if r[group] == g) for g in groups)

        horizons[env] = {"parallel_wall_s": smallest("parallel_wall_s"),
                         "parallel_cost_usd": smallest("parallel_cost_usd")}
        for r in mine:
            r["return_at_equal_time"] = return_at(r["parallel_curve"],
                                                  horizons[env]["parallel_wall_s"])
            r["return_at_equal_cost"] = return_at(r["parallel_cost_curve"],
                                                  horizons[env]["parallel_cost_usd"])
    return horizons
