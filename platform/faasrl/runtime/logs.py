"""What a function prints, logs and warns, captured per invocation inside its container.

``sys.stdout`` and ``sys.stderr`` become ``CapturedStream``s: each write still reaches the
container's own output (the backend's log file, ``docker logs``) and is also kept in a bounded
``Tail``, the running invocation's or the container's. The root logger gets a handler writing
to the captured stderr (level INFO) once the function has imported ``logging`` (checked after
its imports and before each run: importing it here would cost every plain cold start 4 ms;
until then a WARNING or worse still reaches stderr through logging's last resort), and
warnings are written to stderr as Python writes them, so all three land in the same place.

Which invocation a write belongs to:

- the one whose run set ``current`` in the writing thread's context (the handler's own thread,
  and asyncio tasks it starts, which copy the context);
- else, when exactly one invocation is running, that one (threads a handler starts do not
  inherit the context; with ``concurrency`` 1 — the default — every write during a run is its);
- else the container's tail: import-time output, threads writing while no invocation or more
  than one runs, which the invoker keeps in the function's container ring.

Not captured: what bypasses ``sys.stdout``/``sys.stderr`` (a child process, C code writing to
file descriptors 1 and 2, ``sys.stdout.buffer``): it still reaches the container's own output.

Standard library only, like the whole runtime.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from typing import Any, TextIO

LOG_MAX = 64 * 1024  # bytes of output kept per invocation (the last), and per container answer
LOG_FORMAT = "[%(levelname)s] %(name)s: %(message)s"
_DROPPED = "[faasrl: {} earlier bytes dropped]\n"

current: contextvars.ContextVar[Tail | None] = contextvars.ContextVar("faasrl_log", default=None)


class Tail:
    """The last ``LOG_MAX`` bytes written to it, and how many before them were dropped."""

    __slots__ = ("dropped", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0  # characters in parts
        self.dropped = 0  # characters dropped from the front (counted as bytes when taken)

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > 2 * LOG_MAX:  # compact: a chatty handler holds ~2 LOG_MAX at most
            joined = "".join(self.parts)
            self.dropped += len(joined) - LOG_MAX
            self.parts, self.size = [joined[-LOG_MAX:]], LOG_MAX

    def take(self) -> str:
        """What it holds (at most ``LOG_MAX`` bytes of UTF-8, a line saying what was dropped
        first), and empty it."""
        if not self.parts:
            return ""
        data = "".join(self.parts).encode(errors="replace")
        dropped = self.dropped
        self.parts, self.size, self.dropped = [], 0, 0
        if len(data) <= LOG_MAX and not dropped:
            return data.decode()
        keep = LOG_MAX - len(_DROPPED.format(dropped + len(data)))
        dropped += max(0, len(data) - keep)
        text = data[-keep:].decode(errors="ignore")  # a cut character goes whole
        return _DROPPED.format(dropped) + text


class Capture:
    """Routes writes to the tail they belong to (see the module's docstring)."""

    def __init__(self) -> None:
        self.container = Tail()
        self.logging = False  # the root logger has our handler
        self._running: list[Tail] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        tail = current.get()
        with self._lock:
            if tail is None:
                tail = self._running[0] if len(self._running) == 1 else self.container
            tail.write(text)

    def take_logging(self) -> None:
        """Give the root logger a handler on the captured stderr (level INFO), once the
        function has imported ``logging``."""
        if self.logging or "logging" not in sys.modules:
            return
        import logging

        with self._lock:  # runs that begin at once add one handler
            if self.logging:
                return
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
            root = logging.getLogger()
            root.addHandler(handler)
            root.setLevel(logging.INFO)
            self.logging = True

    def begin(self) -> tuple[Tail, contextvars.Token[Tail | None]]:
        """A new invocation's tail, current in this thread's context until ``end``."""
        if not self.logging:
            self.take_logging()
        tail = Tail()
        with self._lock:
            self._running.append(tail)
        return tail, current.set(tail)

    def end(self, tail: Tail, token: contextvars.Token[Tail | None]) -> str:
        """The invocation's output; later writes of its threads go to the container."""
        current.reset(token)
        with self._lock:
            self._running.remove(tail)
            return tail.take()

    def take_container(self) -> str:
        """What was written outside any invocation since the last call."""
        with self._lock:
            return self.container.take()


class CapturedStream:
    """A text stream that writes to ``capture`` and to the stream it replaces."""

    def __init__(self, capture: Capture, original: TextIO):
        self._capture = capture
        self._original = original

    def write(self, text: str) -> int:
        self._capture.write(text)
        return self._original.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, encoding, isatty, buffer, ...
        return getattr(self._original, name)


def install() -> Capture:
    """Capture this process's ``sys.stdout`` and ``sys.stderr`` (and its root logger, once
    imported: ``Capture.take_logging``)."""
    capture = Capture()
    sys.stdout = CapturedStream(capture, sys.stdout)  # type: ignore[assignment]
    sys.stderr = CapturedStream(capture, sys.stderr)  # type: ignore[assignment]
    capture.take_logging()  # the zygote's and a stem cell's children have it already
    return capture
