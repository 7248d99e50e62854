"""Invocation latency: the gateway's warm path against a direct runtime call and an in-process call.

All three are measured in the same run, interleaved in blocks so that machine drift hits them
alike, with the same keep-alive HTTP client for the two HTTP paths. The gateway's overhead is its
p50 minus the direct call's p50 (target: at most 1 ms). Cold start is measured as a client sees
it: a function that has never run, invoked once (process start + handler load + first run).

    python bench/invoke_latency.py [--n 2000] [--cold 10] [--out results/invoke_latency.json]
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from faasrl.config import Settings
from faasrl.embedded import EmbeddedPlatform
from faasrl.runtime.server import Context

ECHO = Path(__file__).resolve().parents[1] / "functions" / "echo"
ARGS = {"x": 1, "tag": "bench"}


def percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": statistics.median(s) * 1e3, "p99_ms": s[int(0.99 * (len(s) - 1))] * 1e3,
            "mean_ms": statistics.fmean(s) * 1e3, "n": len(s)}


def timed(call: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def http_caller(host: str, port: int, path: str, body: dict[str, Any],
                headers: dict[str, str]) -> Callable[[], Any]:
    conn = http.client.HTTPConnection(host, port)
    payload = json.dumps(body)
    hdrs = {"Content-Type": "application/json", **headers}

    def call() -> Any:
        conn.request("POST", path, payload, hdrs)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {data[:200]!r}")
        return data

    return call


def in_process_caller() -> Callable[[], Any]:
    spec = importlib.util.spec_from_file_location("echo_handler", ECHO / "handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ctx = Context("bench", "echo", 128, time.monotonic() + 3600)
    return lambda: json.dumps(module.main(ARGS, ctx))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="warm calls per path")
    parser.add_argument("--blocks", type=int, default=10, help="interleaved blocks")
    parser.add_argument("--cold", type=int, default=10, help="cold starts")
    parser.add_argument("--out", type=Path, default=Path("bench/results/invoke_latency.json"))
    args = parser.parse_args()
    console = Console()

    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state), port=0, token="bench-token")
        with EmbeddedPlatform(settings) as platform, platform.client() as client:
            client.deploy(ECHO)
            client.invoke("echo", ARGS)  # cold start, so that the paths below are warm
            (container,) = client.cluster()["functions"]["echo"]["containers"]
            host, port = container["endpoint"].split(":")
            # The runtime takes /run from its invoker only: the bench is in the gateway's
            # process, so it can show the container's secret as the invoker does.
            invoker = platform._app.state.services.invoker
            (handle,) = [c.handle for c in invoker.containers() if c.id == container["id"]]
            runtime_auth = {"Authorization": f"Bearer {handle.secret}"}
            gw_host, gw_port = platform.url.removeprefix("http://").split(":")
            paths = {
                "in-process handler": in_process_caller(),
                "direct runtime /run": http_caller(
                    host, int(port), "/run", {"args": ARGS, "deadline_s": 60}, runtime_auth),
                "gateway /invoke": http_caller(
                    gw_host, int(gw_port), "/v1/functions/echo/invoke", {"args": ARGS},
                    {"Authorization": "Bearer bench-token"}),
            }
            samples: dict[str, list[float]] = {name: [] for name in paths}
            for call in paths.values():
                timed(call, 200)  # warm-up
            with console.status("warm invocations"):
                for _ in range(args.blocks):
                    for name, call in paths.items():
                        samples[name] += timed(call, args.n // args.blocks)

            cold_client, cold_server = [], []
            with console.status("cold starts"):
                for i in range(args.cold):
                    client.deploy({"name": f"cold-{i}", "handler": "handler:main",
                                   "code_dir": str(ECHO), "cpu": 0.1, "memory_mb": 128})
                    t0 = time.perf_counter()
                    rec = client.invoke(f"cold-{i}", ARGS)
                    cold_client.append(time.perf_counter() - t0)
                    cold_server.append(rec["init_s"])
                    assert rec["cold"], rec
                    client.delete(f"cold-{i}")

    results = {name: percentiles(s) for name, s in samples.items()}
    results["cold start (client)"] = percentiles(cold_client)
    results["cold start (container init)"] = percentiles(cold_server)
    overhead = (results["gateway /invoke"]["p50_ms"]
                - results["direct runtime /run"]["p50_ms"])
    summary = {
        "gateway_overhead_p50_ms": overhead,
        "gateway_over_direct_p50_ratio": results["gateway /invoke"]["p50_ms"]
        / results["direct runtime /run"]["p50_ms"],
        "target_overhead_ms": 1.0,
        "meets_target": overhead <= 1.0,
    }

    table = Table("path", "p50 ms", "p99 ms", "mean ms", "n", title="invocation latency")
    for name, r in results.items():
        table.add_row(name, f"{r['p50_ms']:.3f}", f"{r['p99_ms']:.3f}", f"{r['mean_ms']:.3f}",
                      str(r["n"]))
    console.print(table)
    console.print(f"gateway overhead over a direct runtime call: {overhead:.3f} ms p50 "
                  f"({summary['gateway_over_direct_p50_ratio']:.2f}x); target <= 1 ms: "
                  f"{'met' if summary['meets_target'] else 'MISSED'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"results": results, "summary": summary,
                                    "python": sys.version.split()[0]}, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
