"""The runtime's HTTP/1.1 front: a request loop of its own on each connection's socket.

The standard library's ``http.server`` parses every request's headers with the ``email``
package and wraps the socket in file objects; on the warm path that was most of a runtime's CPU
per ``/run``. Here a connection's thread reads into one buffer, finds the end of the headers,
and looks only at what the runtime protocol uses: ``Content-Length``, ``Authorization``,
``Connection`` (and ``Expect: 100-continue``, which curl sends with big bodies). Every answer
is JSON with a ``Content-Length``, written with one ``sendall``. Requests may be pipelined:
what follows a request in the buffer is the next one.

A request the loop cannot read (a bad request line, a bad or repeated ``Content-Length``,
chunked bodies, headers past ``MAX_HEAD`` bytes or ``MAX_HEADERS`` lines) gets a 400 naming
the part, and the connection is closed, as the client and the server no longer agree where
the next request starts. ``POST`` needs the bearer secret when there is one (``401`` and
close otherwise; ``GET`` is open), so only the invoker that started a container can run it.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

MAX_HEAD = 64 * 1024  # bytes of request line and headers
MAX_HEADERS = 100  # header lines
_RECV = 64 * 1024
_LINGER_S, _LINGER_READS = 2.0, 64  # what a refused client may still send: 2 s, 4 MiB
_REASONS = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
            405: b"Method Not Allowed", 409: b"Conflict", 500: b"Error"}
_ANSWER = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
_CLOSE = b"Connection: close\r\n"
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def dumps(obj: Any) -> bytes:
    """Compact JSON (NaN refused: the invoker's ``json`` would accept it, JSON does not)."""
    return _ENCODER.encode(obj).encode()


def error(kind: str, message: str, tb: str | None = None) -> dict[str, Any]:
    """The protocol's error answer: ``{error: {type, message, traceback?}}``."""
    err: dict[str, Any] = {"type": kind, "message": message}
    if tb:
        err["traceback"] = tb
    return {"error": err}


class BadRequest(ValueError):
    """The request could not be read; the message names the part at fault."""


class Request:
    """One request as the runtime needs it (paths are compared whole: no query strings)."""

    __slots__ = ("body", "keep_alive", "method", "path")

    def __init__(self, method: str, path: str, body: bytes, keep_alive: bool):
        self.method, self.path, self.body, self.keep_alive = method, path, body, keep_alive


class Head:
    """What the request line and headers say."""

    __slots__ = ("authorization", "expect_continue", "keep_alive", "length", "method", "path")

    def __init__(self, line: bytes):
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[1].startswith(b"/"):
            raise BadRequest("request line: expected 'METHOD /path HTTP/1.1'")
        method, path, version = parts
        if version == b"HTTP/1.1":
            self.keep_alive = True
        elif version == b"HTTP/1.0":
            self.keep_alive = False
        else:
            raise BadRequest(f"request line: {version[:16]!r} is not HTTP/1.1")
        self.method, self.path = method.decode("latin-1"), path.decode("latin-1")
        self.length = 0
        self.authorization = b""
        self.expect_continue = False

    def header(self, line: bytes, seen_length: bool) -> bool:
        """Take one header line in; returns whether it was a Content-Length."""
        name, colon, value = line.partition(b":")
        if not colon or not name or name[-1:].isspace():
            raise BadRequest(f"headers: {line[:64]!r} is not 'Name: value'")
        name = name.lower()
        if name == b"content-length":
            value = value.strip()
            if not value.isdigit() or len(value) > 15:
                raise BadRequest(f"Content-Length: {value[:32]!r} is not a number of bytes")
            if seen_length and int(value) != self.length:
                raise BadRequest("Content-Length: given twice, differently")
            self.length = int(value)
            return True
        if name == b"authorization":
            self.authorization = value.strip()
        elif name == b"connection":
            tokens = value.lower()
            if b"close" in tokens:
                self.keep_alive = False
            elif b"keep-alive" in tokens:
                self.keep_alive = True
        elif name == b"transfer-encoding":
            raise BadRequest("Transfer-Encoding: not supported; send a Content-Length")
        elif name == b"expect" and value.strip().lower() == b"100-continue":
            self.expect_continue = True
        return False


def parse_head(head: bytes) -> Head:
    """The request line and headers (``head`` without its final blank line)."""
    lines = head.split(b"\r\n")
    if len(lines) > MAX_HEADERS + 1:
        raise BadRequest(f"headers: more than {MAX_HEADERS}")
    parsed = Head(lines[0])
    seen_length = False
    for line in lines[1:]:
        seen_length = parsed.header(line, seen_length) or seen_length
    return parsed


class Connection:
    """One client's keep-alive connection, served by its own thread."""

    def __init__(self, sock: socket.socket, secret: bytes | None):
        self.sock = sock
        self._secret = secret
        self._buf = b""

    def answer(self, status: int, payload: bytes, close: bool = False) -> None:
        """Send one JSON answer (``close``: say so; the caller then closes)."""
        self.sock.sendall(_ANSWER % (status, _REASONS.get(status, b"Error"), len(payload),
                                     _CLOSE if close else b"", payload))

    def serve(self, handle: Callable[[Connection, Request], None]) -> None:
        """Answer requests until the client closes, a request cannot be read, or the client
        asked to close. A client that goes away mid-request ends only this connection."""
        try:
            while (request := self._next()) is not None:
                handle(self, request)
                if not request.keep_alive:
                    break
        except BadRequest as exc:
            self._refuse(400, error("BadRequest", str(exc)))
        except OSError:
            pass  # the client went away
        except Exception as exc:  # a bug of ours: say so rather than drop the connection
            traceback.print_exc()
            self._refuse(500, error(type(exc).__name__, str(exc), traceback.format_exc()))
        finally:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        self.sock.close()

    def _refuse(self, status: int, out: dict[str, Any]) -> None:
        """Answer and close while the client may still be sending: closing a socket with
        unread data resets the connection, and a reset can destroy the answer before the
        client reads it; so stop writing, then read until the client closes (bounded)."""
        with contextlib.suppress(OSError):
            self.answer(status, dumps(out), close=True)
            self.sock.shutdown(socket.SHUT_WR)
            self.sock.settimeout(_LINGER_S)
            for _ in range(_LINGER_READS):
                if not self.sock.recv(_RECV):
                    break

    def _next(self) -> Request | None:
        """The next request, or None when the connection is done with (the client closed, or
        a POST without the secret, which was answered 401)."""
        head = self._read_head()
        if head is None:
            return None
        if head.method == "POST" and not self._authorized(head.authorization):
            self._refuse(401, error("Unauthorized", "this runtime takes requests from the "
                                                    "invoker that started it only"))
            return None
        if head.expect_continue and head.length > len(self._buf):
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = self._read_body(head.length)
        if body is None:
            return None
        return Request(head.method, head.path, body, head.keep_alive)

    def _authorized(self, authorization: bytes) -> bool:
        if self._secret is None:
            return True
        scheme, _, token = authorization.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._secret)

    def _read_head(self) -> Head | None:
        buf, start = self._buf, 0
        while True:
            buf = buf.lstrip(b"\r\n")  # blank lines before a request are allowed (RFC 9112)
            end = buf.find(b"\r\n\r\n", start)
            if 0 <= end <= MAX_HEAD:
                self._buf = buf[end + 4:]
                return parse_head(buf[:end])
            if end > MAX_HEAD or len(buf) > MAX_HEAD:
                raise BadRequest(f"headers: longer than {MAX_HEAD} bytes")
            chunk = self.sock.recv(_RECV)
            if not chunk:
                return None  # closed between requests, or mid-request: nothing to answer
            start = max(0, len(buf) - 3)
            buf += chunk

    def _read_body(self, length: int) -> bytes | None:
        buf = self._buf
        if len(buf) >= length:
            self._buf = buf[length:]
            return buf[:length]
        parts, missing = [buf], length - len(buf)
        while missing > 0:
            chunk = self.sock.recv(min(missing, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            missing -= len(chunk)
        self._buf = b""
        return b"".join(parts)


def listener(address: tuple[str, int], listen_fd: int | None) -> socket.socket:
    """The listening socket: bound here, or (socket activation) bound by the backend and
    inherited, so there is no race for a free port and connections queue up before we are
    ready."""
    if listen_fd is not None:
        return socket.socket(fileno=listen_fd)
    return socket.create_server(address)


def serve_forever(sock: socket.socket, handle: Callable[[Connection, Request], None],
                  secret: str | None) -> None:
    """Accept connections for ever, each on a daemon thread of its own (the invoker keeps
    several open to a runtime whose ``concurrency`` allows concurrent runs)."""
    key = secret.encode() if secret is not None else None
    while True:
        try:
            conn, _ = sock.accept()
        except OSError as exc:  # out of fds, or a connection reset before it was accepted
            if exc.errno not in (errno.ECONNABORTED, errno.EINTR):
                time.sleep(0.05)
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            threading.Thread(target=Connection(conn, key).serve, args=(handle,),
                             daemon=True).start()
        except RuntimeError:  # no thread to be had: this client is turned away, not all
            conn.close()
