"""Helpers the tests share: test-function manifests, waiting, ports, process checks, jobs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from faasrl.client import Client

TEST_FUNCTIONS = Path(__file__).parent / "functions"
REPO = Path(__file__).resolve().parents[1]
TEST_NETWORK = "faasrl-test"  # the Docker network the tests' platforms join (removed after)


def fn(name: str = "t", handler: str = "fns:echo", **kw: Any) -> dict[str, Any]:
    """A manifest for one of the test handlers."""
    return {"name": name, "handler": handler, "code_dir": str(TEST_FUNCTIONS), "cpu": 0.1,
            "memory_mb": 256, **kw}


def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition",
             poll_s: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(poll_s)


def start_runtime(*extra: str, preexec_fn: Callable[[], None] | None = None,
                  env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """``python -m faasrl.runtime`` on a free port, serving the test handlers; (process, URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "faasrl.runtime", "--port", "0", *extra],
                            cwd=TEST_FUNCTIONS, stdout=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    port = re.search(r":(\d+) ", line)
    assert port, line
    return proc, f"http://127.0.0.1:{port.group(1)}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def error_fields(exc: Any) -> set[str]:
    """The fields a pydantic ``ValidationError`` names, dotted as the API's 422 names them."""
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def finished(client: Any, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The job's record once it has ended: not pending, running, or interrupted (which a
    restarted gateway resumes)."""
    return wait_for(lambda: (j := client.job(job_id))["status"] not in
                    ("pending", "running", "interrupted") and j,
                    timeout_s=timeout_s, what=f"job {job_id} to finish", poll_s=0.1)


def succeeded(client: Any, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The job's record once it has ended, which must be a success."""
    job = finished(client, job_id, timeout_s)
    assert job["status"] == "succeeded", job
    return job


def assert_rows_whole(rows: list[dict[str, Any]], rounds: int,
                      env_steps: int | None = None) -> None:
    """A job's metrics rows after any fault: one per round, in order, none missing or twice;
    ``env_steps`` per round when given (synchronous: actors * envs * steps); running sums
    that agree with the rows."""
    assert [r["round"] for r in rows] == list(range(rounds)), [r["round"] for r in rows]
    total_steps = total_cost = 0.0
    for row in rows:
        if env_steps is not None:
            assert row["env_steps"] == env_steps, row
        total_steps += row["env_steps"]
        total_cost += row["cost_round"]
        assert row["total_env_steps"] == total_steps, row
        assert abs(row["cost_total"] - total_cost) <= 1e-9 + 1e-6 * total_cost, row


def stall(rows: list[dict[str, Any]]) -> float:
    """How much longer than the median round the slowest round took (what a fault cost);
    round 0 is left out: its learner warms up."""
    times = sorted(r["round_s"] for r in rows[1:])
    return times[-1] - times[len(times) // 2]


def at_round(client: Client, job_id: str, k: int) -> None:
    wait_for(lambda: client.job(job_id)["round"] >= k, timeout_s=120, what=f"round {k}",
             poll_s=0.05)


def every_invocation_recorded(client: Client, function: str, at_least: int) -> None:
    """Records of ``function`` exist for at least the invocations the rows account for."""
    recs = wait_for(lambda: len(r := client.invocations(function, limit=1000)) >= at_least
                    and r, what=f"{at_least} records of {function}")
    assert all(r["status"] in ("success", "error", "timeout") for r in recs)


# ------------------------------------------------------------- the gateway as a process
def gateway(state: Path, port: int, token: str, *options: str,
            **env: str) -> subprocess.Popen[bytes]:
    """``faasrl up`` with ``options`` in its own process (its log in the state dir's parent)."""
    log = open(state.parent / f"gateway-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "faasrl", "up", "--port", str(port), "--state-dir", str(state),
         *options],
        env={**os.environ, "FAASRL_TOKEN": token, **env}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def gateway_up(url: str, token: str, proc: subprocess.Popen[bytes],
               timeout_s: float = 60) -> Client:
    """A client of the gateway process ``proc`` once it answers at ``url``."""
    def healthy() -> bool:
        assert proc.poll() is None, f"the gateway exited with {proc.returncode}"
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout_s=timeout_s, what="the gateway", poll_s=0.1)
    return Client(url, token)


async def _pipelined(host: str, port: int, request: bytes, count: int, depth: int
                     ) -> list[tuple[int, bytes]]:
    """``count`` copies of ``request`` on one connection, ``depth`` sent before their answers
    are read; each answer's (status, body)."""
    reader, writer = await asyncio.open_connection(host, port)
    out: list[tuple[int, bytes]] = []
    try:
        while len(out) < count:
            batch = min(depth, count - len(out))
            writer.write(request * batch)
            await writer.drain()
            for _ in range(batch):
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                out.append((status, await reader.readexactly(length)))
    finally:
        writer.close()
    return out


def pipelined_invocations(url: str, function: str, args: Any, count: int,
                          connections: int = 8, depth: int = 32) -> list[tuple[int, bytes]]:
    """``count`` sync invocations through the gateway at ``url`` (no token), pipelined on
    ``connections`` keep-alive connections: the gateway's own rate, with no client library's
    cost per request. Each answer's (status, body), in order per connection."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"args": args}).encode()
    request = (f"POST /v1/functions/{function}/invoke HTTP/1.1\r\nHost: {host}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    shares = [count // connections + (i < count % connections) for i in range(connections)]

    async def run() -> list[list[tuple[int, bytes]]]:
        return await asyncio.gather(*(_pipelined(host, int(port), request, n, depth)
                                      for n in shares))

    return [answer for part in asyncio.run(run()) for answer in part]
