"""The runtime's own HTTP/1.1 request loop (``faasrl/runtime/http.py``), spoken to over raw
sockets by a real runtime process: what a general client never sends (pipelined requests,
requests in pieces, malformed or oversized heads, clients that leave mid-request) and the
deadlines its watchdog keeps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

import pytest
from helpers import start_runtime

from faasrl.runtime.http import MAX_HEAD, MAX_HEADERS
from faasrl.runtime.server import SECRET_ENV, TIMEOUT_EXIT

SECRET = "s3cret"
AUTH = f"Authorization: Bearer {SECRET}\r\n"


class Conn:
    """A raw keep-alive connection to the runtime and a buffered reader of its answers."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader: BinaryIO = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> tuple[int, dict[str, str], Any]:
        status = int(self.reader.readline().split()[1])
        headers = {}
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.reader.read(int(headers["content-length"]))
        return status, headers, json.loads(body)

    def closed(self) -> bool:
        """The runtime closed this connection (a read sees the end, not a timeout)."""
        try:
            return self.reader.read(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def post(path: str, body: Any, auth: str = AUTH, extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: runtime\r\n{auth}{extra}Content-Type: "
            f"application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: runtime\r\n\r\n"


def runtime_with_secret() -> tuple[subprocess.Popen[str], int]:
    proc, url = start_runtime(env={**os.environ, SECRET_ENV: SECRET})
    return proc, int(url.rsplit(":", 1)[1])


def init(port: int, handler: str, **body: Any) -> None:
    conn = Conn(port)
    try:
        conn.send(post("/init", {"handler": handler, **body}))
        status, _, out = conn.answer()
        assert status == 200, out
    finally:
        conn.close()


@pytest.fixture
def runtime() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc, port = runtime_with_secret()
    yield proc, port
    proc.kill()
    proc.wait()


@pytest.fixture
def echo(runtime) -> int:
    """A warm runtime of ``fns:echo``; its port."""
    init(runtime[1], "fns:echo")
    return runtime[1]


def still_serves(port: int) -> None:
    conn = Conn(port)
    try:
        conn.send(HEALTHZ)
        assert conn.answer()[0] == 200
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(echo):
    conn = Conn(echo)
    conn.send(post("/run", {"args": "a"}) + HEALTHZ + post("/run", {"args": "b"}))
    first, health, second = conn.answer(), conn.answer(), conn.answer()
    assert first[2]["result"]["args"] == "a" and first[2]["result"]["calls"] == 1
    assert health[2]["invocations"] >= 1
    assert second[2]["result"]["args"] == "b" and second[2]["result"]["calls"] == 2
    conn.close()


def test_a_request_in_pieces_is_read_whole(echo):
    """Split inside the request line, inside the blank line that ends the head, in the body."""
    data = post("/run", {"args": {"x": "y" * 1000}})
    end = data.index(b"\r\n\r\n")
    cuts = [3, end + 2, end + 4 + 10, len(data)]
    conn = Conn(echo)
    start = 0
    for cut in cuts:
        conn.send(data[start:cut])
        start = cut
        time.sleep(0.05)  # so that the pieces arrive in reads of their own
    status, _, out = conn.answer()
    assert status == 200 and out["result"]["args"] == {"x": "y" * 1000}
    conn.close()


UNREADABLE = {
    "garbage": (b"HELLO\r\n\r\n", "request line"),
    "not HTTP/1.x": (b"GET /healthz HTTP/2.0\r\n\r\n", "request line"),
    "no path": (b"GET healthz HTTP/1.1\r\n\r\n", "request line"),
    "long request line": (b"GET /" + b"x" * (MAX_HEAD + 10) + b" HTTP/1.1\r\n\r\n",
                          "headers: longer than"),
    "too many headers": (b"GET /healthz HTTP/1.1\r\n" + b"X-A: 1\r\n" * (MAX_HEADERS + 1)
                         + b"\r\n", "headers: more than"),
    "no colon": (b"GET /healthz HTTP/1.1\r\nHost runtime\r\n\r\n", "headers: "),
    "bad length": (b"POST /run HTTP/1.1\r\nContent-Length: abc\r\n\r\n", "Content-Length: "),
    "negative length": (b"POST /run HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                        "Content-Length: "),
    "two lengths": (b"POST /run HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                    "Content-Length: given twice"),
    "chunked": (b"POST /run HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "Transfer-Encoding: "),
}


@pytest.mark.parametrize("case", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_request_is_400_naming_the_part_and_closes(echo, case):
    data, part = case
    conn = Conn(echo)
    conn.send(data)
    status, headers, out = conn.answer()
    assert status == 400 and out["error"]["type"] == "BadRequest", out
    assert out["error"]["message"].startswith(part), out
    assert headers["connection"] == "close" and conn.closed()
    conn.close()
    still_serves(echo)


def test_clients_that_leave_mid_request_end_only_their_connection(echo):
    whole = post("/run", {"args": 1})
    end = whole.index(b"\r\n\r\n")
    for partial in (whole[:10], whole[:end + 2], whole[:end + 4] + b'{"ar', whole):
        conn = Conn(echo)
        conn.send(partial)
        conn.close()  # the last one leaves before reading its answer
    still_serves(echo)
    conn = Conn(echo)
    conn.send(post("/run", {"args": 2}))
    assert conn.answer()[2]["result"]["args"] == 2
    conn.close()


@pytest.mark.parametrize("auth", ["", "Authorization: Bearer wrong\r\n",
                                  f"Authorization: Basic {SECRET}\r\n",
                                  f"Authorization: Bearer {SECRET}x\r\n"])
def test_a_post_without_the_secret_is_401_and_closes(runtime, auth):
    _, port = runtime
    conn = Conn(port)
    conn.send(post("/init", {"handler": "fns:echo"}, auth=auth))
    status, headers, out = conn.answer()
    assert status == 401 and out["error"]["type"] == "Unauthorized"
    assert headers["connection"] == "close" and conn.closed()
    conn.close()
    still_serves(port)  # GET /healthz needs no secret
    init(port, "fns:echo")  # not initialized by the refused request


def test_connection_close_and_http_1_0_close_after_the_answer(echo):
    for request in (b"GET /healthz HTTP/1.0\r\n\r\n",
                    b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"):
        conn = Conn(echo)
        conn.send(request)
        assert conn.answer()[0] == 200 and conn.closed()
        conn.close()
    conn = Conn(echo)  # HTTP/1.0 asking to be kept alive
    conn.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + HEALTHZ)
    assert conn.answer()[0] == 200 and conn.answer()[0] == 200
    conn.close()


def test_expect_100_continue_is_answered_before_the_body(echo):
    data = post("/run", {"args": 7}, extra="Expect: 100-continue\r\n")
    end = data.index(b"\r\n\r\n") + 4
    conn = Conn(echo)
    conn.send(data[:end])
    assert conn.reader.readline() == b"HTTP/1.1 100 Continue\r\n"
    assert conn.reader.readline() == b"\r\n"
    conn.send(data[end:])
    assert conn.answer()[2]["result"]["args"] == 7
    conn.close()


def test_other_methods_paths_and_bodies_refused(echo):
    conn = Conn(echo)
    conn.send(b"PUT /run HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}" + post("/nope", {})
              + b"GET /healthz?x=1 HTTP/1.1\r\n\r\n")
    assert [conn.answer()[0] for _ in range(3)] == [405, 404, 404]
    conn.send(post("/run", {"deadline_s": "inf"}))
    status, _, out = conn.answer()
    assert status == 400 and out["error"]["message"].startswith("deadline_s"), out
    deep = b"[" * 100_000 + b"]" * 100_000
    conn.send(b"POST /run HTTP/1.1\r\n" + AUTH.encode()
              + b"Content-Length: %d\r\n\r\n" % len(deep) + deep)
    status, _, out = conn.answer()
    assert status == 400 and out["error"]["message"].startswith("request body: "), out
    conn.close()


def test_concurrency_allows_that_many_runs_at_once(runtime):
    """``fns:meet`` returns only once two runs are inside it together."""
    _, port = runtime
    init(port, "fns:meet", concurrency=2)
    conns = [Conn(port), Conn(port)]
    for conn in conns:
        conn.send(post("/run", {"deadline_s": 30}))
    assert [conn.answer()[2].get("result") for conn in conns] == [{"met": True}] * 2
    for conn in conns:
        conn.close()


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_run_with_an_earlier_deadline_times_out_while_the_watchdog_sleeps(
        runtime, concurrency):
    """A first run leaves the watchdog asleep until its 60 s deadline (with ``concurrency``
    2 that run is still going); a second run that overruns a 0.3 s deadline still gets
    ``Timeout``, and the runtime exits."""
    proc, port = runtime
    init(port, "fns:sleep", concurrency=concurrency)
    first, second = Conn(port), Conn(port)
    first.send(post("/run", {"args": {"s": 0 if concurrency == 1 else 5}, "deadline_s": 60}))
    if concurrency == 1:
        assert first.answer()[2]["result"]["slept"] == 0
    second.send(post("/run", {"args": {"s": 30}, "deadline_s": 0.3}))
    status, _, out = second.answer()
    assert status == 200 and out["error"]["type"] == "Timeout", out
    assert proc.wait(10) == TIMEOUT_EXIT
    for conn in (first, second):
        conn.close()
