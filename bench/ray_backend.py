"""The Ray backend against the process backend, in the same run on the same machine.

For each backend: warm invoke latency (the built-in echo, sequential, through the gateway),
cold start (a function never run, invoked once: the record's ``init_s`` and the client's wall)
of one too small to fork from the zygote (256 MB: a new interpreter) and of one big enough
(``FORKED_MB``: a fork of the node's zygote, when the backend has one), and a CartPole PPO job
(2 one-core actors and a one-core learner): its wall time and its round time (median over its
rounds after the first). The Ray backend runs on the default local cluster ``faasrl up
--backend ray`` starts (one node, the host's cores), so its figures include Ray's placement and
one more hop (the actor) at start, not a network.

    python bench/ray_backend.py [--quick] [--out bench/results/ray_backend.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
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
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_num_prestart_python_workers": "0",
           "RAY_prestart_worker_first_driver": "0"}  # the local cluster takes RAY_* variables


def job_spec(rounds: int) -> dict[str, Any]:
    return {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 256,
            "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
            "stop": {"max_rounds": rounds}}


FORKED_MB = 1024  # enough for the zygote's heap and FORK_HEADROOM_MB


def cold_starts(client: Client, code: str, n: int, memory_mb: int,
                progress: Progress) -> tuple[float, float]:
    """Medians of the record's ``init_s`` and the client's wall of ``n`` first invocations."""
    task = progress.add_task(f"  cold starts ({memory_mb} MB)", total=n)
    init, wall = [], []
    for i in range(n):
        name = f"cold{i}-{time.monotonic_ns()}"
        client.deploy({"name": name, "handler": "handler:main", "code_sha256": code,
                       "cpu": 0.1, "memory_mb": memory_mb})
        t0 = time.perf_counter()
        rec = client.invoke(name, {"x": 1})
        wall.append(time.perf_counter() - t0)
        assert rec["status"] == "success" and rec["cold"], rec
        init.append(rec["init_s"])
        client.delete(name)
        progress.advance(task)
    return statistics.median(init), statistics.median(wall)


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
    code = client.upload_code(ECHO)
    cold_init, cold_wall = cold_starts(client, code, n_cold, 256, progress)
    fork_init, fork_wall = cold_starts(client, code, n_cold, FORKED_MB, progress)
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
    learner = client.invocations("learner", 1000)
    return {"warm_p50_ms": statistics.median(warm) * 1e3,
            "warm_p90_ms": sorted(warm)[int(0.9 * (len(warm) - 1))] * 1e3,
            "cold_init_s": cold_init, "cold_wall_s": cold_wall,
            "cold_fork_init_s": fork_init, "cold_fork_wall_s": fork_wall,
            "job_s": state["finished_at"] - state["started_at"],
            "round_s": statistics.median(r["round_s"] for r in rows[1:]),
            "rounds": len(rows), "learner_cold": sum(r["cold"] for r in learner)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 invokes, 3 cold, 4 rounds")
    parser.add_argument("--out", type=Path, default=Path("bench/results/ray_backend.json"))
    args = parser.parse_args()
    n_warm, n_cold, rounds = (100, 3, 4) if args.quick else (1000, 10, 15)
    os.environ.update(RAY_ENV)
    console = Console()
    results: dict[str, Any] = {}
    with Progress(console=console) as progress:
        for backend in ("process", "ray"):
            progress.console.print(f"[bold]{backend} backend[/bold]")
            with tempfile.TemporaryDirectory() as state:
                settings = Settings(state_dir=Path(state), port=0, token="bench-token",
                                    backend=backend, maintain_interval_s=0.05)
                with EmbeddedPlatform(settings) as platform, platform.client() as client:
                    results[backend] = measure(client, n_warm, n_cold, rounds, progress)
    ratios = {k: results["ray"][k] / results["process"][k]
              for k in ("warm_p50_ms", "cold_init_s", "cold_wall_s", "cold_fork_init_s",
                        "cold_fork_wall_s", "job_s", "round_s")}
    table = Table("", "process", "ray (local)", "ray / process",
                  title="Ray backend vs process backend (same run)")
    for key, ratio in ratios.items():
        table.add_row(key, f"{results['process'][key]:.3g}", f"{results['ray'][key]:.3g}",
                      f"{ratio:.2f}x")
    console.print(table)
    write_results(args.out, {"results": results, "ratios": ratios, "quick": args.quick})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
