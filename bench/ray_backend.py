"""The Ray backend against the process backend, in the same run on the same machine.

For each backend: warm invoke latency (the built-in echo, sequential, through the gateway),
cold start (a function never run, invoked once: the record's ``init_s`` and the client's wall),
and a CartPole PPO job's round time (median over its rounds after the first). The Ray backend
runs on a local two-node cluster (``ray.cluster_utils``: a head with no cores, two worker nodes),
so its figures include Ray's placement and one more hop (the actor) at start, not a network.

    python bench/ray_backend.py [--quick] [--out bench/results/ray_backend.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from jobrun import write_results
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform

ECHO = Path(__file__).resolve().parents[1] / "functions" / "echo"
WORKER = {"num_cpus": 2, "memory": 6 * 2**30, "object_store_memory": 80 * 2**20}
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_num_prestart_python_workers": "0",
           "RAY_prestart_worker_first_driver": "0"}


def job_spec(rounds: int) -> dict[str, Any]:
    return {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 256,
            "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
            "stop": {"max_rounds": rounds}}


@contextmanager
def ray_cluster() -> Iterator[str]:
    """A local two-node Ray cluster; its address."""
    from ray.cluster_utils import Cluster

    os.environ.update(RAY_ENV)
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 0, "include_dashboard": False,
                                      "object_store_memory": 80 * 2**20})
    try:
        for _ in range(2):
            cluster.add_node(**WORKER)
        cluster.wait_for_nodes(timeout=120)
        yield cluster.address
    finally:
        cluster.shutdown()


def measure(client: Client, n_warm: int, n_cold: int, rounds: int,
            progress: Progress) -> dict[str, Any]:
    task = progress.add_task("  warm invokes", total=n_warm + 5)
    for _ in range(5):  # a container up and warm
        client.invoke("echo", {"x": 1})
        progress.advance(task)
    warm = []
    for _ in range(n_warm):
        t0 = time.perf_counter()
        rec = client.invoke("echo", {"x": 1})
        warm.append(time.perf_counter() - t0)
        assert rec["status"] == "success", rec
        progress.advance(task)
    task = progress.add_task("  cold starts", total=n_cold)
    cold_init, cold_wall = [], []
    code = client.upload_code(ECHO)
    for i in range(n_cold):
        name = f"cold{i}-{time.monotonic_ns()}"
        client.deploy({"name": name, "handler": "handler:main", "code_sha256": code,
                       "cpu": 0.1, "memory_mb": 256})
        t0 = time.perf_counter()
        rec = client.invoke(name, {"x": 1})
        cold_wall.append(time.perf_counter() - t0)
        assert rec["status"] == "success" and rec["cold"], rec
        cold_init.append(rec["init_s"])
        client.delete(name)
        progress.advance(task)
    task = progress.add_task("  CartPole job", total=rounds)
    job = client.submit(job_spec(rounds))
    deadline = time.monotonic() + 600
    while (state := client.job(job["id"]))["status"] in ("pending", "running"):
        progress.update(task, completed=state.get("round", 0))
        if time.monotonic() > deadline:
            raise SystemExit("the CartPole job took over 600 s")
        time.sleep(0.5)
    assert state["status"] == "succeeded", state
    progress.update(task, completed=rounds)
    rows = client.job_metrics(job["id"])
    return {"warm_p50_ms": statistics.median(warm) * 1e3,
            "warm_p90_ms": sorted(warm)[int(0.9 * (len(warm) - 1))] * 1e3,
            "cold_init_s": statistics.median(cold_init),
            "cold_wall_s": statistics.median(cold_wall),
            "round_s": statistics.median(r["round_s"] for r in rows[1:]),
            "rounds": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 invokes, 3 cold, 4 rounds")
    parser.add_argument("--out", type=Path, default=Path("bench/results/ray_backend.json"))
    args = parser.parse_args()
    n_warm, n_cold, rounds = (100, 3, 4) if args.quick else (1000, 10, 10)
    console = Console()
    results: dict[str, Any] = {}
    with Progress(console=console) as progress:
        for backend in ("process", "ray"):
            progress.console.print(f"[bold]{backend} backend[/bold]")
            with tempfile.TemporaryDirectory() as state, \
                    (ray_cluster() if backend == "ray" else nullcontext()) as address:
                settings = Settings(state_dir=Path(state), port=0, token="bench-token",
                                    backend=backend, ray_address=address,
                                    maintain_interval_s=0.05)
                with EmbeddedPlatform(settings) as platform, platform.client() as client:
                    results[backend] = measure(client, n_warm, n_cold, rounds, progress)
    ratios = {k: results["ray"][k] / results["process"][k]
              for k in ("warm_p50_ms", "cold_init_s", "cold_wall_s", "round_s")}
    table = Table("", "process", "ray (2 nodes)", "ray / process",
                  title="Ray backend vs process backend (same run)")
    for key, ratio in ratios.items():
        table.add_row(key, f"{results['process'][key]:.3g}", f"{results['ray'][key]:.3g}",
                      f"{ratio:.2f}x")
    console.print(table)
    write_results(args.out, {"results": results, "ratios": ratios, "quick": args.quick})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
