"""Serving a job's policy: warm policy invocations through the gateway, against the same load
sent straight at the policy function's runtimes, and the same answer computed in one process,
in one run.

Two real jobs train one round each on an embedded platform (PPO on CartPole-v1, an MLP; PPO
on ALE/Pong-v5, the Nature CNN on 4x84x84 uint8 frames: one round leaves it barely trained,
which costs a forward pass exactly as a trained one does), then ``POST /v1/jobs/{id}/serve``
deploys each one's policy function. Per model, batch (1 and 64 observations per invocation)
and level (1, 16, 64 clients), the load generator (``bench/loadgen.py``, its own process) keeps
every client's keep-alive connection busy for a fixed time through the gateway's ``/invoke``,
then at the warm containers' runtime ``/run`` (client i at container i mod N). CartPole's
observations go as JSON lists, Pong's as ``{b64, dtype, shape}`` (64 frame stacks as JSON
numbers would pass the 6 MB payload limit). In-process: the policy function's own
``ServedPolicy.answer`` on the same request, and the bare torch forward under it, one at a
time. Targets: the gateway's p50 over the direct runtime's at most 0.5 ms at batch 1 (one
client), and at least 2,000 CartPole actions/s on 2 cores (batching counts).

    python bench/policy_serving.py [--quick] [--seconds 5] [--out results/policy_serving.json]
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from invoke_latency import Endpoint
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from throughput import run_level

from faasrl.client import Client
from faasrl.config import Settings
from faasrl.contracts import POLICY_ENV, PolicyConfig
from faasrl.embedded import EmbeddedPlatform
from faasrl.rl.serving import ServedPolicy, parse_request

TOKEN = "bench-token"
ECHO_ARGS = {"obs": [0.1, 0.2, 0.3, 0.4]}  # a CartPole request's size, answered as is
LEVELS = (1, 16, 64)
BATCHES = (1, 64)
CONTAINERS = 2  # one per core: the policy function reserves a core per container
TARGET_OVERHEAD_MS, TARGET_ACTIONS_PER_S = 0.5, 2000.0
OK = {"gateway": '"status":"success"', "direct": '"result":'}
ONE_ROUND = {"controller": {"name": "fixed", "actors": 1}, "evaluation_episodes": 0,
             "stop": {"max_rounds": 1}}
JOBS = {"cartpole": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32},
        "pong": {"env_id": "ALE/Pong-v5", "envs_per_actor": 1, "steps_per_actor": 32,
                 "hyperparameters": {"num_minibatches": 1, "update_epochs": 1}}}


def observations(model: str, batch: int) -> Any:
    """The ``obs`` of a request: ``batch`` observations (one, unbatched, when 1)."""
    rng = np.random.default_rng(batch)
    if model == "cartpole":
        obs = rng.normal(0, 0.5, (batch, 4)).astype(np.float32)
        return (obs[0] if batch == 1 else obs).tolist()
    frames = rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8)
    frames = frames[0] if batch == 1 else frames
    return {"b64": base64.b64encode(frames.tobytes()).decode(), "dtype": "uint8",
            "shape": list(frames.shape)}


def percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"per_s": len(s) / sum(s), "p50_ms": statistics.median(s) * 1e3,
            "p99_ms": s[int(0.99 * (len(s) - 1))] * 1e3, "n": len(s)}


def timed(call: Any, seconds: float) -> list[float]:
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


@contextmanager
def serving(console: Console) -> Iterator[tuple[EmbeddedPlatform, Client, dict[str, str]]]:
    """A platform of its own, each job trained and its policy served: (platform, client,
    model -> function name)."""
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0, token=TOKEN)
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            functions = {}
            for model, spec in JOBS.items():
                with console.status(f"training one round of {spec['env_id']}"):
                    job = client.submit({**spec, **ONE_ROUND})
                    while (job := client.job(job["id"]))["status"] in ("pending", "running"):
                        time.sleep(0.5)
                if job["status"] != "succeeded":
                    raise RuntimeError(f"the {model} job ended {job['status']}: {job}")
                functions[model] = client.serve_job(job["id"], name=f"{model}-policy")[
                    "function"]
            yield platform, client, functions


def warm(platform: EmbeddedPlatform, client: Client, name: str, args: dict[str, Any],
         timeout_s: float = 120.0) -> list[Endpoint]:
    """``CONTAINERS`` warm containers of ``name`` (others' idle ones give way), and each one's
    runtime ``/run`` endpoint (the bench runs in the gateway's process, so it can show each
    container's secret as the invoker does)."""
    rec = client.invoke(name, args)
    assert rec["status"] == "success", rec
    client.prewarm(name, CONTAINERS)
    deadline = time.monotonic() + timeout_s
    while sum(c["state"] == "idle" for c in
              client.cluster()["functions"][name]["containers"]) < CONTAINERS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{CONTAINERS} {name} containers not idle in {timeout_s} s")
        time.sleep(0.1)
    invoker = platform._app.state.services.invoker
    run = json.dumps({"args": args, "deadline_s": 60}).encode()
    return [Endpoint(c.handle.host, c.handle.port, "/run", run,
                     {"Authorization": f"Bearer {c.handle.secret}"})
            for c in invoker.containers() if c.function == name and c.handle is not None]


class LoopProfile:
    """cProfile on the gateway's event-loop thread (where every request is handled) while in
    the block. Deterministic, so it slows what it measures and weighs many small calls up: the
    level it watches is run again besides the measured one. py-spy would be the better tool,
    but it cannot read another process's memory in this sandbox."""

    def __init__(self, platform: EmbeddedPlatform):
        self.loop = platform._server.servers[0].get_loop()
        self.profile = cProfile.Profile()

    def _on_loop(self, call: Any) -> None:
        done = threading.Event()
        self.loop.call_soon_threadsafe(lambda: (call(), done.set()))
        done.wait(10)

    def __enter__(self) -> LoopProfile:
        self._on_loop(self.profile.enable)
        return self

    def __exit__(self, *_: object) -> None:
        self._on_loop(self.profile.disable)

    def top(self, n: int) -> list[tuple[str, float, float]]:
        """The ``n`` functions with the most time of their own: (name, own s, inclusive s)."""
        stats = pstats.Stats(self.profile).stats  # type: ignore[attr-defined]
        rows = [(f"{func[2]} ({Path(func[0]).name}:{func[1]})", tt, ct)
                for func, (_, _, tt, ct, _) in stats.items()]
        return sorted(rows, key=lambda r: r[1], reverse=True)[:n]


def handler_p50_ms(client: Client, name: str) -> float:
    """The median of the handler's own run time (the runtime's measure) over the function's
    recent invocations."""
    return statistics.median(r["run_s"] for r in client.invocations(name, limit=500)) * 1e3


def in_process(blob: bytes, args: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The policy function's answer in this process (parsing and checking the observations
    included), and the torch forward alone, one call at a time."""
    torch.set_num_threads(1)  # as the function's container runs it (one core)
    served = ServedPolicy(blob)
    answer = percentiles(timed(lambda: served.answer(args), seconds))
    x = torch.from_numpy(served.observations(parse_request(args))[0])
    with torch.no_grad():
        forward = percentiles(timed(lambda: served.model.actor(served.model.features(x)),
                                    seconds))
    return {"answer": answer, "forward": forward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1.5 s per level (a smoke run)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per level")
    parser.add_argument("--out", type=Path, default=Path("bench/results/policy_serving.json"))
    parser.add_argument("--profile", action="store_true",
                        help="once more, CartPole's batch-1 1-client gateway level under "
                             "cProfile on the gateway's event loop (its top functions)")
    args = parser.parse_args()
    seconds, warmup_s = (1.5, 0.5) if args.quick else (args.seconds, 1.0)
    console = Console(width=170)
    rows: list[dict[str, Any]] = []
    local: dict[tuple[str, int], dict[str, Any]] = {}
    profile: LoopProfile | None = None
    profiled: dict[str, Any] | None = None
    with serving(console) as (platform, client, functions):
        me = psutil.Process()
        redis_pid = platform.redis.pid if platform.redis else None
        host, port = platform.url.removeprefix("http://").split(":")

        def gateway(name: str, request: dict[str, Any]) -> Endpoint:
            return Endpoint(host, int(port), f"/v1/functions/{name}/invoke",
                            json.dumps({"args": request}).encode(),
                            {"Authorization": f"Bearer {TOKEN}"})

        def level(model: str, batch: int, name: str, path: str, targets: list[Endpoint],
                  clients: int, watched: dict[str, list[psutil.Process]]) -> None:
            row = run_level(targets, OK[path], clients, seconds, warmup_s, watched)
            if path == "gateway" and clients == 1:
                row["handler_p50_ms"] = handler_p50_ms(client, name)
            rows.append({"model": model, "batch": batch, "path": path, **row,
                         "actions_per_s": row["per_s"] * batch})

        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("levels", total=len(functions) * len(BATCHES)
                                     * (len(LEVELS) * 2 + 1) + 2)
            for model, name in functions.items():
                config = PolicyConfig.model_validate_json(client.function(name)["env"][
                    POLICY_ENV])
                blob = client.model(config.job, config.version)
                for batch in BATCHES:
                    request = {"obs": observations(model, batch)}
                    runtimes = warm(platform, client, name, request)
                    procs = [p for p in me.children(recursive=True) if p.pid != redis_pid]
                    watched = {"gateway": [me], "runtimes": procs}
                    for clients in LEVELS:
                        for path, targets in (("gateway", [gateway(name, request)]),
                                              ("direct", runtimes)):
                            progress.update(task, description=f"{model} batch {batch}, "
                                                              f"{path}, {clients} clients")
                            level(model, batch, name, path, targets, clients, watched)
                            progress.advance(task)
                            if args.profile and (model, batch, path, clients) == \
                                    ("cartpole", 1, "gateway", 1):
                                with LoopProfile(platform) as profile:
                                    profiled = run_level(targets, OK[path], clients, seconds,
                                                         warmup_s, watched)
                    progress.update(task, description=f"{model} batch {batch}, in process")
                    local[model, batch] = in_process(blob, request, seconds)
                    progress.advance(task)
            # The platform's own hop, for a function that does nothing with the request.
            runtimes = warm(platform, client, "echo", ECHO_ARGS)
            for path, targets in (("gateway", [gateway("echo", ECHO_ARGS)]),
                                  ("direct", runtimes)):
                progress.update(task, description=f"echo, {path}, 1 client")
                level("echo", 1, "echo", path, targets, 1, {"gateway": [me], "runtimes": [
                    p for p in me.children(recursive=True) if p.pid != redis_pid]})
                progress.advance(task)

    table = Table("model", "batch", "clients", "path", "inv/s", "actions/s", "p50 ms",
                  "p99 ms", "gateway cores", "runtimes cores",
                  title=f"warm policy invocations ({seconds:g} s per level, {CONTAINERS} "
                        f"containers, {os.cpu_count()} cores)")
    for r in rows:
        table.add_row(r["model"], str(r["batch"]), str(r["clients"]), r["path"],
                      f"{r['per_s']:,.0f}", f"{r['actions_per_s']:,.0f}", f"{r['p50_ms']:.2f}",
                      f"{r['p99_ms']:.2f}", f"{r['cpu_cores']['gateway']:.2f}",
                      f"{r['cpu_cores']['runtimes']:.2f}")
    for (model, batch), r in local.items():
        for what in ("answer", "forward"):
            x = r[what]
            table.add_row(model, str(batch), "1", f"in process: {what}", f"{x['per_s']:,.0f}",
                          f"{x['per_s'] * batch:,.0f}", f"{x['p50_ms']:.3f}",
                          f"{x['p99_ms']:.3f}", "-", "-")
    console.print(table)
    by = {(r["model"], r["batch"], r["path"], r["clients"]): r for r in rows}
    hops = (*JOBS, "echo")
    overhead = {m: by[m, 1, "gateway", 1]["p50_ms"] - by[m, 1, "direct", 1]["p50_ms"]
                for m in hops}
    best = max(r["actions_per_s"] for r in rows
               if r["model"] == "cartpole" and r["path"] == "gateway")
    summary: dict[str, Any] = {
        "gateway_overhead_p50_ms_batch_1": overhead,
        "gateway_over_direct_p50_ratio_batch_1": {
            m: by[m, 1, "gateway", 1]["p50_ms"] / by[m, 1, "direct", 1]["p50_ms"]
            for m in hops},
        "gateway_over_in_process_p50_ratio_batch_1": {
            m: by[m, 1, "gateway", 1]["p50_ms"] / local[m, 1]["answer"]["p50_ms"]
            for m in JOBS},
        "batch_1_p50_breakdown_ms": {m: {
            "handler": by[m, 1, "gateway", 1]["handler_p50_ms"],
            "runtime_http_json": by[m, 1, "direct", 1]["p50_ms"]
            - by[m, 1, "gateway", 1]["handler_p50_ms"],
            "gateway": overhead[m]} for m in hops},
        "cartpole_best_actions_per_s_gateway": best,
        "targets": {"overhead_ms": TARGET_OVERHEAD_MS, "actions_per_s": TARGET_ACTIONS_PER_S},
    }
    summary["meets_targets"] = (max(overhead[m] for m in JOBS) <= TARGET_OVERHEAD_MS
                                and best >= TARGET_ACTIONS_PER_S)
    for m, b in summary["batch_1_p50_breakdown_ms"].items():
        console.print(f"{m}, batch 1, 1 client: p50 {by[m, 1, 'gateway', 1]['p50_ms']:.3f} ms "
                      f"through the gateway = handler {b['handler']:.3f} + runtime HTTP and "
                      f"JSON {b['runtime_http_json']:.3f} + gateway {b['gateway']:.3f} "
                      f"({summary['gateway_over_direct_p50_ratio_batch_1'][m]:.2f}x the direct "
                      "runtime)")
    console.print(
        "gateway overhead at batch 1: " + ", ".join(f"{m} {overhead[m]:+.3f} ms" for m in JOBS)
        + f" (target <= {TARGET_OVERHEAD_MS:g} ms; echo's in the same run {overhead['echo']:+.3f}"
        f" ms); CartPole through the gateway: up to {best:,.0f} actions/s (target >= "
        f"{TARGET_ACTIONS_PER_S:,.0f}): {'met' if summary['meets_targets'] else 'MISSED'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if profile is not None and profiled is not None:
        top = profile.top(25)
        console.print(f"the gateway's event loop under cProfile, CartPole batch 1, 1 client "
                      f"({profiled['per_s']:,.0f} inv/s, p50 {profiled['p50_ms']:.2f} ms "
                      "profiled): own and inclusive ms per invocation")
        n = profiled["invocations"] + profiled["per_s"] * warmup_s
        for name, tt, ct in top:
            console.print(f"  {tt / n * 1e3:7.3f} {ct / n * 1e3:7.3f}  {name}")
        summary["gateway_loop_profile_ms_per_invocation"] = [
            {"function": name, "own": tt / n * 1e3, "inclusive": ct / n * 1e3}
            for name, tt, ct in top]
    args.out.write_text(json.dumps({"rows": rows, "in_process": {
        f"{m}/{b}": r for (m, b), r in local.items()}, "summary": summary, "seconds": seconds,
        "cores": os.cpu_count(), "python": sys.version.split()[0]}, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
