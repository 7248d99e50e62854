"""Soak: warm invocations at full rate beside a training job for N minutes, watching memory.

A platform with the default settings (embedded Redis, process backend, records bounded by
``record_max_mb`` and archived) serves warm ``echo`` invocations from ``--clients`` keep-alive
connections (throughput.py's load generator, run in 10 s segments back to back) while a CartPole
job trains (another is submitted whenever one ends). Every segment it samples the memory of the
gateway (this process, RSS), the runtimes (PSS: they share the zygote's pages) and Redis (RSS),
Redis's ``used_memory``, the records' bytes and count in Redis, the archive's bytes on disk, and
the gateway's open files and threads. It reports each series' growth per hour (least squares
over the whole run, and over the steady state: once records leave Redis at their bound), the
Redis bytes each invocation cost until the bound, and the last values. It fails nothing: a
benchmark.

    python bench/soak.py [--minutes 30] [--clients 64] [--containers 8]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import psutil
import redis
from invoke_latency import warm_echo
from jobrun import write_results
from rich.console import Console
from rich.table import Table
from throughput import OK, run_level

SEGMENT_S = 10.0
JOB = {"env_id": "CartPole-v1", "envs_per_actor": 4, "steps_per_actor": 128,
       "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
       "stop": {"max_rounds": 100_000}}
SERIES = ("gateway_rss_mb", "runtimes_pss_mb", "redis_rss_mb", "redis_used_mb",
          "records_mb", "archive_mb", "gateway_open_files", "gateway_threads")
MB = 1024 * 1024


def rss_mb(procs: list[psutil.Process], *, proportional: bool = False) -> float:
    """Their resident memory; ``proportional``: PSS, which counts a page that forked processes
    share once among them (the runtimes fork from one zygote)."""
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss if proportional else p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / MB


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.glob("*") if f.is_file()) / MB if path.exists() \
        else 0.0


def slope_per_hour(t: list[float], y: list[float]) -> float | None:
    """Least-squares growth of ``y`` per hour of ``t`` (seconds)."""
    n = len(t)
    if n < 3:
        return None
    mt, my = sum(t) / n, sum(y) / n
    var = sum((x - mt) ** 2 for x in t)
    return sum((x - mt) * (v - my) for x, v in zip(t, y, strict=True)) / var * 3600 if var \
        else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--containers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("bench/results/soak.json"))
    args = parser.parse_args()
    console = Console(width=160)
    samples: list[dict[str, Any]] = []
    jobs = 0

    with warm_echo(args.containers) as echo:
        platform, client = echo.platform, echo.client
        settings = platform.settings
        me = psutil.Process()
        redis_pid = platform.redis.pid if platform.redis else None
        redis_proc = [psutil.Process(redis_pid)] if redis_pid else []
        r = redis.Redis.from_url(platform.redis_url)
        job = client.submit(JOB)
        jobs += 1
        t0 = time.monotonic()
        invocations = 0
        base_used = r.info("memory")["used_memory"]
        while time.monotonic() - t0 < args.minutes * 60:
            runtimes = [p for p in me.children(recursive=True) if p.pid != redis_pid]
            watched = {"gateway": [me], "redis": redis_proc, "runtimes": runtimes}
            level = run_level([echo.gateway], OK["gateway"], args.clients, SEGMENT_S, 0.0,
                              watched)
            invocations += level["invocations"]
            if client.job(job["id"])["status"] not in ("pending", "running"):
                job = client.submit(JOB)
                jobs += 1
            records = client.health()["records"]
            sample = {
                "t_s": time.monotonic() - t0, "invocations": invocations,
                "per_s": level["per_s"], "p99_ms": level["p99_ms"],
                "gateway_rss_mb": rss_mb([me]),
                "runtimes_pss_mb": rss_mb(runtimes, proportional=True),
                "redis_rss_mb": rss_mb(redis_proc),
                "redis_used_mb": r.info("memory")["used_memory"] / MB,
                "records_mb": records["redis_mb"], "records_in_redis": records["in_redis"],
                "archived": records["archived"], "discarded": records["discarded"],
                "archive_mb": folder_mb(settings.record_archive_dir),
                "gateway_open_files": me.num_fds(), "gateway_threads": me.num_threads()}
            samples.append(sample)
            console.print(" ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v:,}"
                                   for k, v in sample.items()))
        r.close()

    # Redis bytes per invocation while no record had left it yet (before the bound).
    filling = [s for s in samples if s["archived"] + s["discarded"] == 0]
    per_invocation = ((filling[-1]["redis_used_mb"] * MB - base_used) / filling[-1]["invocations"]
                      if filling and filling[-1]["invocations"] else None)
    # The steady state: once records leave Redis, the records' share of it is at its bound.
    bound = [s for s in samples if s["archived"] + s["discarded"] > 0]
    growth = {name: {"whole_run": slope_per_hour([s["t_s"] for s in samples],
                                                 [s[name] for s in samples]),
                     "at_bound": slope_per_hour([s["t_s"] for s in bound],
                                                [s[name] for s in bound])}
              for name in SERIES}
    last = samples[-1] if samples else {}
    since = f"from {bound[0]['t_s']:,.0f} s" if bound else "never reached"
    table = Table("series", "first", "last", "growth/h (whole run)",
                  f"growth/h (records at their bound: {since})",
                  title=f"soak: {args.minutes:g} min, {args.clients} clients, "
                        f"{last.get('invocations', 0):,} invocations, {jobs} job(s), "
                        f"{os.cpu_count()} cores, record_max_mb {settings.record_max_mb:g}")
    for name in SERIES:
        g = growth[name]
        table.add_row(name, f"{samples[0][name]:,.1f}", f"{last[name]:,.1f}",
                      *(f"{v:+,.1f}" if v is not None else "-"
                        for v in (g["whole_run"], g["at_bound"])))
    console.print(table)
    rate = last.get("invocations", 0) / last["t_s"] if last else 0.0
    console.print(f"{rate:,.0f} invocations/s on average; Redis bytes per invocation until "
                  f"the bound: {per_invocation:,.0f}" if per_invocation else
                  f"{rate:,.0f} invocations/s; the records reached their bound at once")
    write_results(args.out, {"minutes": args.minutes, "clients": args.clients,
                             "containers": args.containers, "cores": os.cpu_count(),
                             "record_max_mb": settings.record_max_mb, "jobs": jobs,
                             "redis_bytes_per_invocation": per_invocation,
                             "growth_per_hour": growth, "samples": samples})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
