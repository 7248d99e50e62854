"""bench/link.py's slow link in front of the session's real Redis: round trips cost two delays,
pipelines one round trip, big values the link's rate, the link is shared by connections, the
counters see exactly the RESP bytes, and nothing is left running after it closes."""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from helpers import REPO

_spec = importlib.util.spec_from_file_location("bench_link", REPO / "bench" / "link.py")
link = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = link  # dataclasses look their module up there
_spec.loader.exec_module(link)

DELAY = 0.025
SLACK = 0.03  # a loaded 2-core machine's scheduling noise, per round trip
PING, PONG = b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n"


@pytest.fixture
def target(redis_url: str, redis_server) -> tuple[str, int]:
    """The session's Redis (emptied: ``redis_url``) as the proxy's target."""
    return redis_server.host, redis_server.port


def _round_trip(sock: socket.socket, request: bytes, reply: bytes) -> float:
    t0 = time.perf_counter()
    sock.sendall(request)
    got = b""
    while len(got) < len(reply):
        chunk = sock.recv(65536)
        assert chunk, "the proxy closed the connection"
        got += chunk
    assert got == reply
    return time.perf_counter() - t0


def _resp(*parts: bytes) -> bytes:
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def test_ping_costs_two_delays(target):
    with link.DelayProxy(target, delay_s=DELAY) as proxy, \
            socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        times = [_round_trip(sock, PING, PONG) for _ in range(8)]
        assert min(times) >= 2 * DELAY
        assert statistics.median(times) < 2 * DELAY + SLACK
        assert (proxy.bytes_up, proxy.bytes_down) == (8 * len(PING), 8 * len(PONG))


def test_pipeline_costs_one_round_trip(target):
    n = 50
    with link.DelayProxy(target, delay_s=DELAY) as proxy, \
            redis.Redis(port=proxy.port) as r:
        r.ping()  # connects (and the client's hello) outside the timing
        t0 = time.perf_counter()
        with r.pipeline(transaction=False) as pipe:
            for i in range(n):
                pipe.set(f"k{i}", i)
            assert all(pipe.execute())
        elapsed = time.perf_counter() - t0
    assert 2 * DELAY <= elapsed < 2 * DELAY + 2 * SLACK  # not n round trips (1.25 s)


def test_rate_limit_and_exact_counters(target):
    rate, value = 20e6, b"x" * 5_000_000
    with link.DelayProxy(target, delay_s=0.005, rate_bytes_s=rate) as proxy, \
            redis.Redis(port=proxy.port) as r:
        r.ping()
        proxy.reset_counters()
        t0 = time.perf_counter()
        assert r.set("big", value)
        t_set = time.perf_counter() - t0
        t0 = time.perf_counter()
        assert r.get("big") == value
        t_get = time.perf_counter() - t0
        up, down = proxy.bytes_up, proxy.bytes_down
    assert len(value) / rate <= t_set < 1.0
    assert len(value) / rate <= t_get < 1.0
    assert up == len(_resp(b"SET", b"big", value)) + len(_resp(b"GET", b"big"))
    assert down == len(b"+OK\r\n") + len(b"$%d\r\n" % len(value)) + len(value) + 2


def test_connections_share_the_link_and_many_work_at_once(target):
    rate, value = 20e6, b"y" * 2_500_000
    with link.DelayProxy(target, delay_s=DELAY, rate_bytes_s=rate) as proxy:
        pool = redis.ConnectionPool(port=proxy.port, max_connections=64)
        r = redis.Redis(connection_pool=pool)
        with ThreadPoolExecutor(64) as ex:
            assert all(ex.map(lambda _: r.ping(), range(64)))  # opens the pool's connections
            t0 = time.perf_counter()
            assert all(ex.map(lambda _: r.ping(), range(64)))
            pings = time.perf_counter() - t0
            t0 = time.perf_counter()
            assert all(ex.map(lambda i: r.set(f"v{i}", value), range(2)))
            both = time.perf_counter() - t0
        pool.disconnect()
    assert pings < 4 * (2 * DELAY + SLACK)  # concurrent round trips, not 64 in a row
    assert both >= 2 * len(value) / rate  # one link: two values take twice as long as one


def test_stop_leaves_nothing_running(target):
    threads = threading.active_count()
    proxy = link.DelayProxy(target, delay_s=DELAY).start()
    port = proxy.port
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    _round_trip(sock, PING, PONG)
    sock.sendall(PING)  # still in flight when the proxy stops
    proxy.stop()
    assert threading.active_count() == threads
    assert sock.recv(100) in (b"", PONG)  # closed, maybe after the delivered reply
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    with pytest.raises(RuntimeError):
        proxy.port  # noqa: B018


def test_unreachable_target_drops_the_connection_only():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()
    with link.DelayProxy(dead) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            assert sock.recv(100) == b""
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            assert sock.recv(100) == b""


def test_cli_prints_port_then_counters(target):
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "link.py"), "--listen", "0",
         "--target", f"{target[0]}:{target[1]}", "--delay-ms", "5", "--rate-mbit", "100"],
        stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(proc.stdout.readline())["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            assert _round_trip(sock, PING, PONG) >= 0.01
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    assert json.loads(out) == {"bytes_up": len(PING), "bytes_down": len(PONG)}


def test_netns_tbf_limits_a_process_in_the_namespace(target):
    """1 MB from inside the namespace over a 40 Mbit/s (5 MB/s) veth takes >= 0.2 s."""
    try:
        with link.netns_link(40) as ns, \
                link.DelayProxy(target, listen=(ns.host_addr, 0)) as proxy:
            script = (
                "import socket,sys,time;"
                "v=b'z'*1_000_000;"
                "req=b'*3\\r\\n$3\\r\\nSET\\r\\n$2\\r\\nns\\r\\n$%d\\r\\n%s\\r\\n'%(len(v),v);"
                f"s=socket.create_connection(('{ns.host_addr}',{proxy.port}),timeout=10);"
                "t0=time.perf_counter();s.sendall(req);r=s.recv(10);"
                "print(time.perf_counter()-t0);sys.exit(r!=b'+OK\\r\\n')")
            done = subprocess.run(ns.command([sys.executable, "-c", script]),
                                  capture_output=True, text=True, timeout=30, check=True)
    except link.NetnsUnavailable as exc:
        pytest.skip(f"no namespace link here: {exc}")
    assert 0.2 <= float(done.stdout) < 1.0
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert ns.name not in left.split()
