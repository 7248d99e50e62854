"""Docker containers as function containers: cold start, warm latency, and what pre-warming buys.

Measured on two platforms with the Docker backend (embedded Redis on the bridge), in one run:
one with no stem cells (``stem_cells=0``), one keeping one per image (``stem_cells=1``).

- cold start as a client sees it (a function never run, echo with 512 MB so that a stem cell
  can become it: start -> first result), on a new container (create, runtime healthy, init)
  and on a stem cell (specialise, init), interleaved with the baseline `docker run --rm IMAGE
  true` (create, start, exit, remove of the same image, nothing in it run). Each trial first
  waits until the stem-cell platform has a ready cell, so no refill runs during a measurement;
- warm invoke latency through the gateway (p50/p99), on the platform without stem cells;
- a CartPole PPO job's round time with the actor function's ``min_warm`` equal to the actor
  count against 0 (cold containers), the functions re-registered before each job so that no
  container of an earlier job is reused. Each job runs ``--rounds`` rounds; "outside rounds"
  is the job's wall time less its rounds: submission, the initial policy, container starts.

    python bench/docker_containers.py [--cold 5] [--warm 500] [--jobs 2] [--rounds 5] [--quick]

``--quick``: 3 cold starts of each kind, 100 warm invocations, no jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jobrun import write_results
from rich.console import Console
from rich.progress import track
from rich.table import Table

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.manifest import load_manifest

REPO = Path(__file__).resolve().parents[1]
ACTORS = 2
COLD_MEMORY_MB = 512  # the cold-start function's: enough for a stem cell's preloaded imports


def ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": statistics.median(s) * 1e3,
            "p99_ms": s[max(0, math.ceil(0.99 * len(s)) - 1)] * 1e3, "n": len(s)}


def bare_run(image: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def cold_start(client: Client, trial: int, stem_cell: bool) -> float:
    """A fresh function (a new name): the invocation waits for its first container, a stem
    cell specialised for it or a new one."""
    spec = load_manifest(REPO / "functions" / "echo").model_copy(
        update={"name": f"echo-cold-{trial}", "keep_alive_s": 0,
                "memory_mb": COLD_MEMORY_MB})
    client.deploy(spec)
    t0 = time.perf_counter()
    rec = client.invoke(spec.name, {"trial": trial})
    elapsed = time.perf_counter() - t0
    assert rec["status"] == "success" and rec["cold"] and rec["stem_cell"] is stem_cell, rec
    client.delete(spec.name)
    return elapsed


def wait_for_stem_cell(client: Client, timeout_s: float = 180.0) -> None:
    """Until the platform has a ready stem cell of the default image (its imports done)."""
    deadline = time.monotonic() + timeout_s
    while client.cluster()["stem_cells"].get("", {}).get("ready", 0) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError("no stem cell became ready")
        time.sleep(0.1)


def register(client: Client, name: str, min_warm: int, trial: int) -> None:
    """Re-register a built-in function (a new generation: older containers retire)."""
    spec = load_manifest(REPO / "functions" / name).model_copy(
        update={"min_warm": min_warm, "env": {"BENCH_TRIAL": str(trial)}})
    client.deploy(spec)


def run_job(client: Client, prewarm: bool, trial: int, rounds: int) -> dict[str, Any]:
    register(client, "actor", ACTORS if prewarm else 0, trial)
    register(client, "learner", 1 if prewarm else 0, trial)
    if prewarm:  # wait until the warm containers are idle, as a cluster kept warm would be
        def warm() -> bool:
            pools = client.cluster()["functions"]
            idle = {f: sum(c["state"] == "idle" for c in pools[f]["containers"])
                    for f in ("actor", "learner")}
            return idle["actor"] >= ACTORS and idle["learner"] >= 1
        deadline = time.monotonic() + 120
        while not warm():
            if time.monotonic() > deadline:
                raise TimeoutError("pre-warmed containers did not become idle")
            time.sleep(0.1)
    spec = {"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": ACTORS},
            "seed": trial, "stop": {"max_rounds": rounds}, "evaluation_episodes": 0}
    t0 = time.perf_counter()
    job_id = client.submit(spec)["id"]
    while (rec := client.job(job_id))["status"] in ("pending", "running"):
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    assert rec["status"] == "succeeded", rec
    rows = client.job_metrics(job_id)
    client.delete_job(job_id)
    return {"wall_s": wall, "round0_s": rows[0]["round_s"],
            "later_round_s": statistics.median(r["round_s"] for r in rows[1:]),
            "outside_rounds_s": wall - sum(r["round_s"] for r in rows)}


@contextlib.contextmanager
def remove_network(name: str) -> Iterator[None]:
    """Remove the Docker network ``name`` on the way out (after the platform has stopped its
    containers), if it was made."""
    try:
        yield
    finally:
        subprocess.run(["docker", "network", "rm", name], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=5, help="cold starts (and bare runs)")
    parser.add_argument("--warm", type=int, default=500, help="warm invocations")
    parser.add_argument("--jobs", type=int, default=2, help="jobs per min_warm setting")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per job")
    parser.add_argument("--image", default="faasrl/runtime:latest")
    parser.add_argument("--quick", action="store_true",
                        help="3 cold starts of each kind, 100 warm invocations, no jobs")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/docker_containers.json")
    args = parser.parse_args()
    if args.quick:
        args.cold, args.warm, args.jobs = 3, 100, 0
    console = Console()

    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as stem_state:
        # A network of the bench's own, removed at the end (the backend makes the network it
        # is given when missing, and leaves it).
        name = f"faasrl-bench-{Path(state).name}"

        def settings(folder: str, node: str, stem_cells: int) -> Settings:
            return Settings(state_dir=Path(folder), port=0, backend="docker",
                            docker_image=args.image, node_name=node, docker_network=name,
                            register_builtins=True, resume_jobs=False, stem_cells=stem_cells)

        with remove_network(name), \
                EmbeddedPlatform(settings(state, name, 0)) as platform, \
                EmbeddedPlatform(settings(stem_state, f"{name}-stem", 1)) as stem_platform, \
                platform.client() as client, stem_platform.client() as stem_client:
            bare_run(args.image)  # the first run pays for loading the image's layers
            bare, cold, stem = [], [], []
            for trial in track(range(args.cold), description="cold starts", console=console):
                wait_for_stem_cell(stem_client)
                bare.append(bare_run(args.image))
                cold.append(cold_start(client, trial, stem_cell=False))
                stem.append(cold_start(stem_client, trial, stem_cell=True))
            client.invoke("echo", {})
            warm = []
            for _ in range(args.warm):
                t0 = time.perf_counter()
                client.invoke("echo", {"x": 1})
                warm.append(time.perf_counter() - t0)
            jobs: dict[str, list[dict[str, Any]]] = {"min_warm=0": [], "min_warm=actors": []}
            for trial in range(args.jobs):
                jobs["min_warm=0"].append(run_job(client, False, trial, args.rounds))
                jobs["min_warm=actors"].append(run_job(client, True, trial, args.rounds))

    results = {"quick": args.quick, "bare_docker_run": ms(bare), "cold_start": ms(cold),
               "cold_start_stem_cell": ms(stem), "warm_invoke": ms(warm),
               "cold_over_bare": statistics.median(cold) / statistics.median(bare),
               "stem_cell_over_bare": statistics.median(stem) / statistics.median(bare),
               "jobs": {k: {f: statistics.median(j[f] for j in v) for f in v[0]}
                        for k, v in jobs.items() if v}}
    table = Table("measure", "p50 ms", "p99 ms", "n", title="Docker containers")
    for key in ("bare_docker_run", "cold_start", "cold_start_stem_cell", "warm_invoke"):
        r = results[key]
        table.add_row(key, f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}", str(r["n"]))
    console.print(table)
    console.print(f"cold start / bare docker run (p50): new container "
                  f"{results['cold_over_bare']:.2f}x, stem cell "
                  f"{results['stem_cell_over_bare']:.2f}x")
    if results["jobs"]:
        jt = Table("CartPole, 2 actors", "round 0 s", "later rounds s", "outside rounds s",
                   "job wall s", title=f"{args.rounds}-round jobs, median of {args.jobs}")
        for key, r in results["jobs"].items():
            jt.add_row(key, f"{r['round0_s']:.2f}", f"{r['later_round_s']:.3f}",
                       f"{r['outside_rounds_s']:.2f}", f"{r['wall_s']:.2f}")
        console.print(jt)
    write_results(args.out, results)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
