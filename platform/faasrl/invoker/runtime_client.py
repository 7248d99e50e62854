"""HTTP/1.1 keep-alive client for the function runtime protocol.

We own both ends of this protocol (``faasrl.runtime`` always answers with a Content-Length and a
JSON body), so a minimal client is enough, and it is several times faster than a general-purpose
one: httpx cost 0.7 ms a call on the warm path. It is a plain asyncio protocol rather than
streams: an exchange is one write and one future that ``data_received`` completes once the
answer's Content-Length has arrived (streams add a waiter per read and a second read for the
body, a tenth of the gateway's CPU per invocation at thousands a second).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

MAX_HEAD = 64 * 1024  # an answer's status line and headers; the runtime sends about 80 bytes

Answer = tuple[int, bytes, bool]  # (status, body, whether the connection stays open)


class RuntimeGone(ConnectionError):
    """The runtime could not be reached or closed the connection before answering."""


class RuntimeClient:
    """Connections to one container's runtime; idle ones are kept for the next request."""

    def __init__(self, host: str, port: int, secret: str | None = None):
        self.host, self.port = host, port
        self._auth = f"Authorization: Bearer {secret}\r\n" if secret else ""
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(self, method: str, path: str, body: Any = None,
                      timeout: float | None = None) -> tuple[int, Any]:
        """Send one request; returns (status, decoded JSON body)."""
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: runtime\r\n{self._auth}"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
        conn = None
        try:
            async with asyncio.timeout(timeout):
                conn = self._idle.pop() if self._idle else await self._connect()
                status, data, keep = await conn.exchange(head.encode() + payload)
        except TimeoutError:  # an OSError too, but the runtime may well be alive: the caller
            _close(conn)  # decides; the connection is mid-exchange
            raise
        except (OSError, ValueError) as exc:
            _close(conn)
            raise RuntimeGone(f"runtime at {self.host}:{self.port}: {exc!r}") from exc
        except BaseException:  # cancellation: the connection is mid-exchange
            _close(conn)
            raise
        if keep and not self._closed:
            self._idle.append(conn)
        else:
            _close(conn)
        return status, json.loads(data) if data else None

    async def _connect(self) -> _Connection:
        _, conn = await asyncio.get_running_loop().create_connection(
            _Connection, self.host, self.port)
        return conn

    def close(self) -> None:
        """Close idle connections; a request in flight closes its own."""
        self._closed = True
        while self._idle:
            _close(self._idle.pop())


class _Connection(asyncio.Protocol):
    """One connection to a runtime, one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._answer: asyncio.Future[Answer] | None = None
        self._gone: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def exchange(self, request: bytes) -> asyncio.Future[Answer]:
        """Send ``request``; the future is the answer."""
        assert self.transport is not None and self._answer is None
        answer = self._answer = asyncio.get_running_loop().create_future()
        if self._gone is not None:
            self._finish(exc=self._gone)
        elif self._buf:  # the runtime never speaks first: this connection is out of step
            self._finish(exc=ValueError(f"unasked bytes from the runtime: {self._buf[:80]!r}"))
        else:
            self.transport.write(request)
        return answer

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._answer is None:
            return  # nothing was asked: the next exchange refuses the connection
        try:
            answer = _parse(self._buf)
        except ValueError as exc:
            self._finish(exc=exc)
            return
        if answer is not None:
            self._finish(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = exc or ConnectionResetError("the runtime closed the connection")
        if self._answer is not None:
            self._finish(exc=self._gone)

    def _finish(self, answer: Answer | None = None, exc: Exception | None = None) -> None:
        fut, self._answer = self._answer, None
        if fut is None or fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(answer)  # type: ignore[arg-type]


def _parse(buf: bytearray) -> Answer | None:
    """The answer at the start of ``buf``, taken out of it; None while it is incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise ValueError(f"an answer's head over {MAX_HEAD} bytes")
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise ValueError(f"not an HTTP answer: {lines[0][:80]!r}") from None
    length, keep = 0, True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection" and value.strip().lower() == "close":
            keep = False
    total = end + 4 + length
    if len(buf) < total:
        return None
    body = bytes(buf[end + 4:total])
    del buf[:total]
    return status, body, keep


def _close(conn: _Connection | None) -> None:
    if conn is not None and conn.transport is not None:
        conn.transport.close()
