"""The function runtime's own CPU per warm ``/run``, against a baseline revision in the same run.

One runtime process (``python -m faasrl.runtime``) serves the ``echo`` function; one keep-alive
client sends ``/run`` back to back and the runtime process's CPU time (user + system, all its
threads) is divided by the runs. With ``--baseline REF`` the runtime of that git revision
(its ``platform/`` folder, unpacked into a temporary folder) is measured too, alternating with
this tree's round by round, so that machine drift hits both alike; the table gives medians.

    python bench/runtime_cpu.py [--quick] [--n 5000] [--rounds 3] [--baseline REF]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from jobrun import write_results
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
ECHO = REPO / "functions" / "echo"
RUN = {"args": {"x": 1, "tag": "bench"}, "deadline_s": 60}
WARMUP = 500


class RuntimeConnection:
    """A blocking keep-alive client: the smallest load that keeps the runtime busy."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, path: str, body: Any) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        self.sock.sendall(f"POST {path} HTTP/1.1\r\nHost: runtime\r\nContent-Type: "
                          f"application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                          + data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the runtime closed the connection")
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += self.sock.recv(65536)
        return int(head.split(b" ", 2)[1]), rest


@contextmanager
def runtime(platform_dir: Path) -> Iterator[tuple[psutil.Process, RuntimeConnection]]:
    """A warm echo runtime from ``platform_dir``, and a client connected to it."""
    proc = subprocess.Popen([sys.executable, "-m", "faasrl.runtime", "--port", "0"],
                            env={**os.environ, "PYTHONPATH": str(platform_dir)}, cwd=ECHO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = re.search(r":(\d+) ", proc.stdout.readline())
        assert port, "the runtime did not say where it listens"
        client = RuntimeConnection(int(port.group(1)))
        status, out = client.post("/init", {"handler": "handler:main", "function": "echo"})
        assert status == 200, out
        yield psutil.Process(proc.pid), client
    finally:
        proc.kill()
        proc.wait()


def measure(platform_dir: Path, n: int) -> dict[str, float]:
    with runtime(platform_dir) as (proc, client):
        for _ in range(WARMUP):
            client.post("/run", RUN)
        cpu0, t0 = sum(proc.cpu_times()[:2]), time.perf_counter()
        for _ in range(n):
            status, out = client.post("/run", RUN)
            assert status == 200 and b'"result"' in out, out
        wall, cpu = time.perf_counter() - t0, sum(proc.cpu_times()[:2]) - cpu0
    return {"cpu_us_per_run": cpu / n * 1e6, "latency_us": wall / n * 1e6}


def unpack(ref: str, into: Path) -> Path:
    """The ``platform/`` folder of git revision ``ref``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "platform"],
                             check=True, capture_output=True).stdout
    tar_path = into / "platform.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "platform"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 1,000 runs")
    parser.add_argument("--n", type=int, default=5000, help="measured runs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="a git revision to compare with (e.g. main)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/runtime_cpu.json"))
    args = parser.parse_args()
    n, rounds = (1000, 1) if args.quick else (args.n, args.rounds)
    console = Console(width=120)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": REPO / "platform"}
        if args.baseline:
            trees[f"baseline {args.baseline}"] = unpack(args.baseline, Path(tmp))
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("rounds", total=rounds * len(trees))
            for _ in range(rounds):
                for name, folder in trees.items():
                    samples[name].append(measure(folder, n))
                    progress.advance(task)
    rows = {name: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
            for name, runs in samples.items()}
    table = Table(title=f"runtime CPU per warm /run (echo; {rounds} rounds of {n:,} runs, medians)")
    for column in ("runtime", "CPU µs / run", "latency µs", "CPU vs baseline"):
        table.add_column(column)
    base = rows.get(f"baseline {args.baseline}")
    for name, row in rows.items():
        ratio = f"{row['cpu_us_per_run'] / base['cpu_us_per_run']:.2f}x" if base else "-"
        table.add_row(name, f"{row['cpu_us_per_run']:.0f}", f"{row['latency_us']:.0f}", ratio)
    console.print(table)
    write_results(args.out, {"rows": rows, "samples": samples, "n": n, "rounds": rounds})
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
