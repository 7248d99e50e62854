"""A slow link for long-haul benchmarks: a TCP proxy that delays and rate-limits what it carries.

The long-haul benchmark puts this between a learner and the Redis its actors sit next to, so that
the learner pays a WAN's round trip and bandwidth on every command while the actors do not. The
kernel here has no ``sch_netem``, so the delay is simulated in user space: each direction is one
link shared by every connection through the proxy (as a real link is), a FIFO serialiser at
``rate_bytes_s`` (a token bucket with no burst allowance) followed by a fixed propagation delay.
A chunk read at ``t`` leaves the serialiser at ``max(t, link free) + size / rate`` and reaches the
far side ``delay_s`` later, so a stream of chunks sees the delay once, not once per chunk, and a
pipeline of N commands costs one round trip. What the serialiser has not sent yet stays in the
sender's socket buffer (TCP backpressure, as behind a real bottleneck), never in memory here.
Connection set-up costs no round trip (the kernel completes the handshake with the proxy); pools
reuse their connections, so a benchmark pays that cost rarely anyway.

``netns_link`` adds a kernel rate limit (``tc tbf`` on a veth pair into a network namespace) for a
process run inside the namespace, where the host allows it; latency still comes from the proxy.

    python bench/link.py --listen 0 --target 127.0.0.1:6379 --delay-ms 25 --rate-mbit 100

prints ``{"port": ...}``, then ``{"bytes_up": ..., "bytes_down": ...}`` on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

CHUNK = 64 * 1024  # largest read: the unit the serialiser stores and forwards
QUEUE_CHUNKS = 256  # chunks in flight per direction and connection (bounds memory, 16 MiB)
BACKLOG_S = 0.005  # serialiser work queued ahead, so that late wake-ups leave the link busy
CONNECT_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 1.0
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
LISTEN_BACKLOG = 1024  # many pooled clients may connect at once
COMMAND_TIMEOUT_S = 10.0  # each ip/tc call of netns_link


class _Link:
    """One direction: the serialiser's clock and the bytes that entered it."""

    def __init__(self, delay_s: float, rate_bytes_s: float | None):
        self.delay_s = delay_s
        self.rate_bytes_s = rate_bytes_s
        self.free_at = 0.0  # when the serialiser finishes what it has been given
        self.bytes = 0

    def send(self, nbytes: int, now: float) -> float:
        """Queue ``nbytes`` read at ``now``; returns when their last byte leaves the serialiser."""
        self.bytes += nbytes
        if self.rate_bytes_s is None:
            return now
        self.free_at = max(self.free_at, now) + nbytes / self.rate_bytes_s
        return self.free_at


class DelayProxy:
    """Forwards ``listen`` to ``target`` with ``delay_s`` each way and at most ``rate_bytes_s``
    per direction (``None``: unlimited), counting the bytes each way. Runs its own event loop in
    a background thread so that a synchronous benchmark can start and stop it."""

    def __init__(self, target: tuple[str, int], *, delay_s: float = 0.0,
                 rate_bytes_s: float | None = None, listen: tuple[str, int] = ("127.0.0.1", 0)):
        if delay_s < 0 or (rate_bytes_s is not None and rate_bytes_s <= 0):
            raise ValueError("delay_s must be >= 0 and rate_bytes_s > 0 (or None)")
        self.target = target
        self.listen = listen
        self._up = _Link(delay_s, rate_bytes_s)  # client -> server
        self._down = _Link(delay_s, rate_bytes_s)  # server -> client
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the proxy is not running")
        return self._port

    @property
    def bytes_up(self) -> int:
        """Bytes from clients towards the target."""
        return self._up.bytes

    @property
    def bytes_down(self) -> int:
        """Bytes from the target back to clients."""
        return self._down.bytes

    def reset_counters(self) -> None:
        """Zero both counters (on the proxy's loop, so that no chunk's count is lost to a race)."""
        async def reset() -> None:
            self._up.bytes = self._down.bytes = 0

        assert self._loop is not None, "the proxy is not running"
        asyncio.run_coroutine_threadsafe(reset(), self._loop).result(START_TIMEOUT_S)

    def start(self) -> DelayProxy:
        if self._thread is not None:
            raise RuntimeError("the proxy was already started")
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="delay-proxy",
                                        daemon=True)
        self._thread.start()
        try:
            self._port = ready.result(START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every connection; returns once the loop's thread has ended."""
        if self._thread is None or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already ended (a failed start)
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise RuntimeError(f"the proxy's thread did not stop within {STOP_TIMEOUT_S:g} s")
        self._port = None

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: concurrent.futures.Future[int]) -> None:
        assert self._loop is not None
        try:
            self._loop.run_until_complete(self._serve(ready))
        finally:
            self._loop.close()

    async def _serve(self, ready: concurrent.futures.Future[int]) -> None:
        try:
            server = await asyncio.start_server(self._accept, *self.listen,
                                                backlog=LISTEN_BACKLOG)
        except OSError as exc:
            ready.set_exception(exc)
            return
        ready.set_result(server.sockets[0].getsockname()[1])
        async with server:  # leaving it closes the listener
            await self._stopping.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._clients:  # a connection whose task was cancelled before it ran
            writer.transport.abort()
        await asyncio.sleep(0)  # let the aborted transports finish closing

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, client_r: asyncio.StreamReader,
                      client_w: asyncio.StreamWriter) -> None:
        server_w: asyncio.StreamWriter | None = None
        try:
            server_r, server_w = await asyncio.wait_for(
                asyncio.open_connection(*self.target), CONNECT_TIMEOUT_S)
            async with asyncio.TaskGroup() as group:
                for src, dst, link in ((client_r, server_w, self._up),
                                       (server_r, client_w, self._down)):
                    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_CHUNKS)
                    group.create_task(self._carry(src, link, queue))
                    group.create_task(self._deliver(queue, dst))
        except* OSError:  # refused, reset or timed out: the connection goes, the proxy stays
            pass
        finally:
            for writer in (client_w, server_w):
                if writer is not None:
                    await _close(writer)
            self._clients.discard(client_w)

    @staticmethod
    async def _carry(src: asyncio.StreamReader, link: _Link,
                     queue: asyncio.Queue[tuple[float, bytes]]) -> None:
        """Read chunks into the link, each stamped with when it reaches the far side (an empty
        chunk is the end of the stream, forwarded in order as a half-close)."""
        loop = asyncio.get_running_loop()
        while True:
            data = await src.read(CHUNK)
            sent = link.send(len(data), loop.time())
            await queue.put((sent + link.delay_s, data))
            if not data:
                return
            if (ahead := sent - BACKLOG_S - loop.time()) > 0:
                await asyncio.sleep(ahead)

    @staticmethod
    async def _deliver(queue: asyncio.Queue[tuple[float, bytes]],
                       dst: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            if not data:
                if dst.can_write_eof():
                    dst.write_eof()
                return
            dst.write(data)
            await dst.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close, flushing what is buffered for a while, then drop the connection."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
    except (OSError, TimeoutError):
        writer.transport.abort()


class NetnsUnavailable(RuntimeError):
    """This host cannot build the namespace link (not root, no ``ip``/``tc``, no tbf)."""


@dataclass(frozen=True)
class NetnsLink:
    """A namespace joined to the host by a rate-limited veth pair: a process run inside reaches
    the host (a ``DelayProxy`` listening there) at ``host_addr``."""

    name: str
    host_addr: str
    ns_addr: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


def _ip(*argv: str) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True,
                       timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        raise NetnsUnavailable(f"{' '.join(argv)}: {str(detail).strip()}") from exc


@contextlib.contextmanager
def netns_link(rate_mbit: float, *, name: str | None = None, subnet: str = "10.231.7",
               burst_kbit: int = 32, latency_ms: int = 400) -> Iterator[NetnsLink]:
    """A namespace ``name`` with ``tbf`` at ``rate_mbit`` on both ends of its veth pair (so each
    direction is limited), torn down on exit. ``subnet``: the first three octets of its /24.
    Raises ``NetnsUnavailable`` where the host does not allow it."""
    name = name or f"fl{os.getpid()}"
    if len(name) > 14:  # the veth ends are named after it, and interface names have 15 chars
        raise ValueError(f"namespace name {name!r} is longer than 14 characters")
    host_if, ns_if = f"{name}h", f"{name}n"
    link = NetnsLink(name, f"{subnet}.1", f"{subnet}.2")
    tbf = ["root", "tbf", "rate", f"{rate_mbit:g}mbit", "burst", f"{burst_kbit}kbit",
           "latency", f"{latency_ms}ms"]
    try:
        _ip("ip", "netns", "add", name)
        _ip("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", name)
        _ip("ip", "addr", "add", f"{link.host_addr}/24", "dev", host_if)
        _ip("ip", "link", "set", host_if, "up")
        _ip("ip", "-n", name, "addr", "add", f"{link.ns_addr}/24", "dev", ns_if)
        _ip("ip", "-n", name, "link", "set", ns_if, "up")
        _ip("ip", "-n", name, "link", "set", "lo", "up")
        _ip("tc", "qdisc", "add", "dev", host_if, *tbf)
        _ip("tc", "-n", name, "qdisc", "add", "dev", ns_if, *tbf)
        yield link
    finally:
        # Deleting a namespace frees its devices asynchronously: delete the pair first, so that
        # the name and subnet are free again when this returns.
        for argv in (("ip", "link", "del", host_if), ("ip", "netns", "del", name)):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(argv, capture_output=True, timeout=COMMAND_TIMEOUT_S)


def _address(text: str, default_host: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or default_host, int(port)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", default="0", help="[HOST:]PORT (default 127.0.0.1:0)")
    parser.add_argument("--target", required=True, help="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay")
    parser.add_argument("--rate-mbit", type=float, default=None,
                        help="per-direction rate (default unlimited)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rate = None if args.rate_mbit is None else args.rate_mbit * 1e6 / 8
    with DelayProxy(_address(args.target, "127.0.0.1"), delay_s=args.delay_ms / 1000,
                    rate_bytes_s=rate, listen=_address(args.listen, "127.0.0.1")) as proxy:
        print(json.dumps({"port": proxy.port}), flush=True)
        stop.wait()
    print(json.dumps({"bytes_up": proxy.bytes_up, "bytes_down": proxy.bytes_down}), flush=True)


if __name__ == "__main__":
    main()
