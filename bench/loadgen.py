"""A closed-loop HTTP/1.1 load generator for the throughput benchmark, run as its own process.

Each client is one keep-alive connection that sends a request as soon as the last answer is in,
for a fixed time. It is written on raw asyncio protocols (uvloop when present) with requests
built once, so that it costs a few microseconds of CPU per request and is not what limits the
rate: it reports its own CPU time, so a run shows it. Only the standard library (and uvloop) is
imported: it must not share the platform's imports or its GIL.

    python bench/loadgen.py < plan.json > result.json

The plan: ``{"seconds", "warmup_s", "clients": [{"host", "port", "request": <latin-1 str>,
"ok": <latin-1 str the body of a good answer contains>}]}``. The result: the count of
invocations finished in the measured window, their latencies' percentiles, errors, the wall and
the generator's CPU seconds.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any


class _Client(asyncio.Protocol):
    """One connection: send, read one answer (Content-Length framed), repeat until ``end``."""

    def __init__(self, request: bytes, ok: bytes, start: float, end: float,
                 latencies: list[float], errors: list[str], done: asyncio.Future[None]):
        self.request, self.ok = request, ok
        self.start, self.end = start, end
        self.latencies, self.errors, self.done = latencies, errors, done
        self.buf = bytearray()
        self.sent = 0.0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.sent = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = bytes(self.buf[:head_end]).lower()
        at = head.find(b"content-length:")
        if at < 0:
            self._fail("an answer without Content-Length")
            return
        line_end = head.find(b"\r\n", at)
        length = int(head[at + 15:line_end if line_end >= 0 else len(head)])
        total = head_end + 4 + length
        if len(self.buf) < total:
            return
        now = time.perf_counter()
        body = bytes(self.buf[head_end + 4:total])
        del self.buf[:total]
        if not head.startswith(b"http/1.1 200") or self.ok not in body:
            self._fail(f"{head.split(b' ', 2)[1].decode()}: {body[:200]!r}")
            return
        if now >= self.start and self.sent <= self.end:
            self.latencies.append(now - self.sent)
        if now < self.end:
            self._send()
        else:
            self._finish()

    def _fail(self, why: str) -> None:
        self.errors.append(why)
        self._finish()

    def _finish(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.errors.append(f"connection lost: {exc!r}")
            self.done.set_result(None)


async def run(plan: dict[str, Any]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    start = t0 + plan["warmup_s"]
    end = start + plan["seconds"]
    latencies: list[float] = []
    errors: list[str] = []
    done = []
    cpu0 = time.process_time()
    for c in plan["clients"]:
        fut: asyncio.Future[None] = loop.create_future()
        request, ok = c["request"].encode("latin-1"), c["ok"].encode("latin-1")
        await loop.create_connection(
            lambda r=request, o=ok, f=fut: _Client(r, o, start, end, latencies, errors, f),
            c["host"], c["port"])
        done.append(fut)
    # Bounded: a client whose answer never comes must not hold the benchmark forever.
    await asyncio.wait(done, timeout=end - time.perf_counter() + 30)
    wall = time.perf_counter() - t0
    lat = sorted(latencies)
    return {
        "invocations": len(lat),
        "per_s": len(lat) / plan["seconds"],
        "p50_ms": statistics.median(lat) * 1e3 if lat else None,
        "p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1e3 if lat else None,
        "mean_ms": statistics.fmean(lat) * 1e3 if lat else None,
        "errors": len(errors) + sum(not f.done() for f in done),
        "first_error": errors[0] if errors else None,
        "generator_cpu_s": time.process_time() - cpu0,
        "wall_s": wall,
    }


def main() -> None:
    plan = json.load(sys.stdin)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(run(plan))
    else:
        result = uvloop.run(run(plan))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
