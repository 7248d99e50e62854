"""Warm-invocation throughput: concurrent clients through the gateway against the same load sent
straight at the runtimes, in one run.

At each level (1, 4, 16, 64 clients) the load generator (``bench/loadgen.py``, a process of its
own) keeps every client's keep-alive connection busy with warm ``echo`` invocations for a fixed
time, first through the gateway's ``/invoke``, then at the warm containers' ``/run`` directly
(client i at container i mod N: the same containers, no gateway). It reports invocations per
second, p50/p99 latency and who spent the CPU: the gateway's process (CPU-seconds per second, and
per invocation, which a busy machine disturbs less than rates), Redis, the runtimes and the
generator itself. Targets (issue 19): >= 3,000 invocations/s through the gateway from 4 to 64
clients and p99 <= 20 ms at 64, on 2 cores.

    python bench/throughput.py [--quick] [--seconds 8] [--containers 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from invoke_latency import Endpoint, warm_echo
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

LOADGEN = Path(__file__).resolve().with_name("loadgen.py")
LEVELS = (1, 4, 16, 64)
TARGET_PER_S, TARGET_P99_MS = 3000.0, 20.0
# What a good answer's body holds: the gateway's record of a success, the runtime's result.
OK = {"gateway": '"status":"success"', "direct": '"result":'}


def cpu_s(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of these processes (those gone since count nothing)."""
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def run_level(targets: list[Endpoint], ok: str, clients: int, seconds: float, warmup_s: float,
              watched: dict[str, list[psutil.Process]]) -> dict[str, Any]:
    """``clients`` connections, client i at ``targets[i % len(targets)]``, for ``seconds``."""
    plan = {"seconds": seconds, "warmup_s": warmup_s,
            "clients": [{"host": t.host, "port": t.port,
                         "request": t.request().decode("latin-1"), "ok": ok}
                        for t in (targets[i % len(targets)] for i in range(clients))]}
    gen = subprocess.Popen([sys.executable, str(LOADGEN)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    # CPU over the whole run, warm-up included, against its whole wall: both from here.
    before = {name: cpu_s(procs) for name, procs in watched.items()}
    t0 = time.monotonic()
    out, _ = gen.communicate(json.dumps(plan), timeout=warmup_s + seconds + 60)
    wall = time.monotonic() - t0
    if gen.returncode != 0:
        raise RuntimeError(f"the load generator failed ({gen.returncode})")
    result = json.loads(out)
    if result["errors"]:
        raise RuntimeError(f"{result['errors']} failed requests at {clients} clients: "
                           f"{result['first_error']}")
    cores = {name: (cpu_s(procs) - before[name]) / wall for name, procs in watched.items()}
    cores["generator"] = result["generator_cpu_s"] / result["wall_s"]
    per_s = result["per_s"]
    return {**result, "clients": clients, "cpu_cores": cores,
            "gateway_cpu_us_per_invocation": cores["gateway"] / per_s * 1e6 if per_s else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per level (a smoke run)")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per level")
    parser.add_argument("--containers", type=int, default=20, help="warm echo containers")
    parser.add_argument("--out", type=Path, default=Path("bench/results/throughput.json"))
    args = parser.parse_args()
    seconds, warmup_s = (2.0, 0.5) if args.quick else (args.seconds, 1.0)
    console = Console(width=160)

    with warm_echo(args.containers) as echo:
        me = psutil.Process()
        redis_pid = echo.platform.redis.pid if echo.platform.redis else None
        redis = [psutil.Process(redis_pid)] if redis_pid else []
        # Everything else this process started: the runtimes (and the zygote they fork from).
        runtimes = [p for p in me.children(recursive=True) if p.pid != redis_pid]
        watched = {"gateway": [me], "redis": redis, "runtimes": runtimes}
        paths = {"gateway": [echo.gateway], "direct": echo.runtimes}
        rows: list[dict[str, Any]] = []
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("levels", total=len(LEVELS) * len(paths))
            for clients in LEVELS:
                for path, targets in paths.items():
                    progress.update(task, description=f"{path}, {clients} clients")
                    row = run_level(targets, OK[path], clients, seconds, warmup_s, watched)
                    rows.append({"path": path, **row})
                    progress.advance(task)

    table = Table("clients", "path", "inv/s", "p50 ms", "p99 ms", "gateway cores",
                  "gateway µs/inv", "runtimes cores", "redis cores", "generator cores",
                  title=f"warm echo throughput ({seconds:g} s per level, "
                        f"{args.containers} containers, {os.cpu_count()} cores)")
    for r in rows:
        c = r["cpu_cores"]
        us = r["gateway_cpu_us_per_invocation"] if r["path"] == "gateway" else None
        table.add_row(str(r["clients"]), r["path"], f"{r['per_s']:,.0f}", f"{r['p50_ms']:.2f}",
                      f"{r['p99_ms']:.2f}", f"{c['gateway']:.2f}",
                      f"{us:.0f}" if us is not None else "-", f"{c['runtimes']:.2f}",
                      f"{c['redis']:.2f}", f"{c['generator']:.2f}")
    console.print(table)
    by = {(r["path"], r["clients"]): r for r in rows}
    summary = {
        "gateway_over_direct_per_s": {n: by["gateway", n]["per_s"] / by["direct", n]["per_s"]
                                      for n in LEVELS},
        "gateway_min_per_s_4_to_64": min(by["gateway", n]["per_s"] for n in LEVELS[1:]),
        "gateway_p99_ms_at_64": by["gateway", 64]["p99_ms"],
    }
    summary["meets_target"] = (summary["gateway_min_per_s_4_to_64"] >= TARGET_PER_S
                               and summary["gateway_p99_ms_at_64"] <= TARGET_P99_MS)
    console.print(
        "gateway / direct invocations/s: "
        + ", ".join(f"{n} clients {x:.2f}x"
                    for n, x in summary["gateway_over_direct_per_s"].items())
        + f"; gateway from 4 to 64 clients >= {summary['gateway_min_per_s_4_to_64']:,.0f}/s, "
        f"p99 at 64 {summary['gateway_p99_ms_at_64']:.1f} ms (target >= {TARGET_PER_S:,.0f}/s, "
        f"<= {TARGET_P99_MS:g} ms: {'met' if summary['meets_target'] else 'MISSED'})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "summary": summary, "seconds": seconds,
                                    "containers": args.containers, "cores": os.cpu_count(),
                                    "python": sys.version.split()[0]}, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
