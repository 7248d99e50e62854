"""The process backend's end of a zygote (``faasrl.runtime.zygote``): it starts one, asks it to
fork containers, and learns from it when they exit.

A forked container is the zygote's child, not the gateway's, so the gateway cannot wait for it.
The zygote reports each exit on its control socket and keeps the child a zombie until told to
reap it, so the container's process-group id stays the backend's to signal, as a Popen'd child's
does. The other way, the gateway as a child subreaper adopting double-forked containers, was
left: being a subreaper is a property of the whole gateway process, which would then adopt (and
have to reap) every orphan of every descendant, and a parent-death signal follows the parent
*thread*, so an adopted container would die with whichever gateway thread it was handed to.

The control socket is one end of a socketpair, inherited by the zygote alone: nothing on the
file system, nothing another process can connect to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

from faasrl.backends.base import ZygoteState
from faasrl.runtime.zygote import MAX_MESSAGE, send

SETTLE_POLL_S = 0.01  # how often a start waiting for the zygote's imports looks again

log = logging.getLogger(__name__)


class ZygoteGone(Exception):
    """The zygote died, was never ready, or did not answer: start the container without it."""


class ZygoteClient:
    """One zygote process (per interpreter and user) and what it told us."""

    def __init__(self, python: str, env: dict[str, str], cwd: Path, log_path: Path,
                 user: Mapping[str, Any], heap_mb: float):
        """``user``: Popen's user/group arguments, as the backend starts its containers;
        ``heap_mb``: what its heap is expected to reach, until it is ready and says."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(log_path, "ab") as out:
                self.proc = subprocess.Popen(
                    [python, "-m", "faasrl.runtime.zygote", "--control-fd",
                     str(theirs.fileno()), "--parent-pid", str(os.getpid())],
                    cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
                    start_new_session=True, **user)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self.cwd = cwd
        self.data_mb = heap_mb  # its heap, which every child it forks starts with
        self.was_ready = False
        self.failure: str | None = None  # why it will never fork, when it said so
        self.not_preloaded: dict[str, str] = {}  # per module it could not import, why
        self._sock = ours
        self._lock = threading.Lock()
        self._settled = threading.Event()  # ready, or gone before that
        self._gone = False
        self._pending: dict[str, Future[int]] = {}
        self._exits: dict[int, int | None] = {}  # its live children -> exit status once known
        threading.Thread(target=self._read, name=f"zygote-{self.pid}", daemon=True).start()

    @property
    def gone(self) -> bool:
        return self._gone

    @property
    def usable(self) -> bool:
        return self.was_ready and not self._gone

    @property
    def state(self) -> ZygoteState:
        """``importing`` until it can fork, then ``ready``; ``gone`` once it died; ``failed``:
        its imports left it unfit to fork (it exits)."""
        if self.failure is not None:
            return "failed"
        return "gone" if self._gone else "ready" if self.was_ready else "importing"

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether it is ready to fork, waiting up to ``timeout_s`` for its imports."""
        self._settled.wait(timeout_s)
        return self.usable

    async def settled(self, timeout_s: float) -> bool:
        """:meth:`wait_ready` for the event loop: polls, holding no executor thread."""
        deadline = time.monotonic() + timeout_s
        while not self._settled.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_POLL_S)
        return self.usable

    async def fork(self, container_id: str, env: dict[str, str], cwd: str, memory_mb: int,
                   fds: Sequence[int], timeout_s: float = 5.0) -> int:
        """The pid of a new container's runtime, serving on ``fds`` (listening socket, the
        secret's pipe, its log file). A zygote that does not answer in time is killed."""
        future: Future[int] = Future()
        with self._lock:
            if self._gone:
                raise ZygoteGone("the zygote is gone")
            self._pending[container_id] = future
            try:
                send(self._sock, {"op": "fork", "id": container_id, "env": env, "cwd": cwd,
                                  "memory_mb": memory_mb}, fds)
            except OSError as exc:
                del self._pending[container_id]
                raise ZygoteGone(f"the zygote is gone: {exc}") from exc
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError:
            self.proc.kill()  # its late child, if any, dies with it
            raise ZygoteGone(f"the zygote did not answer in {timeout_s:g} s") from None

    def exit_code(self, pid: int) -> int | None:
        """A child's exit status; ``-SIGKILL`` once the zygote is gone (its parent-death
        signal)."""
        return self._exits.get(pid, -1)

    def reap(self, pid: int) -> None:
        """The backend is done with this child: the zygote may let its pid go."""
        with self._lock:
            self._exits.pop(pid, None)
            if not self._gone:
                with contextlib.suppress(OSError):
                    send(self._sock, {"op": "reap", "pid": pid})

    async def close(self, grace_s: float = 2.0) -> None:
        """End it (it kills whatever children it still has); SIGKILL after ``grace_s``."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        for _ in range(int(grace_s / 0.01)):
            if self.proc.poll() is not None:
                return
            await asyncio.sleep(0.01)
        self.proc.kill()

    def _read(self) -> None:
        try:
            while data := self._sock.recv(MAX_MESSAGE):
                self._on(json.loads(data))
        except (OSError, ValueError) as exc:
            log.warning("zygote %d: control socket failed: %s", self.pid, exc)
        with self._lock:  # no send() is under way: the socket can go
            self._gone = True
            self._sock.close()
            pending, self._pending = self._pending, {}
            for pid, status in self._exits.items():
                if status is None:
                    self._exits[pid] = -signal.SIGKILL
        for future in pending.values():
            with contextlib.suppress(InvalidStateError):
                future.set_exception(ZygoteGone("the zygote died"))
        self._settled.set()
        code = self.proc.wait()
        log.log(logging.WARNING if code else logging.DEBUG,
                "zygote %d exited with status %d", self.pid, code)

    def _on(self, message: dict) -> None:
        if "exit" in message:
            with self._lock:
                if message["exit"] in self._exits:
                    self._exits[message["exit"]] = message["status"]
        elif "id" in message:
            with self._lock:
                future = self._pending.pop(message["id"], None)
                if "pid" in message:
                    self._exits[message["pid"]] = None
            if future is not None:
                with contextlib.suppress(InvalidStateError):
                    if "pid" in message:
                        future.set_result(message["pid"])
                    else:
                        future.set_exception(ZygoteGone(message.get("error", "fork failed")))
        elif "ready" in message:
            self.not_preloaded = dict(message.get("failed") or {})
            missing = ", ".join(f"{name} ({why})" for name, why in self.not_preloaded.items())
            if message["ready"]:
                self.data_mb = float(message["data_mb"])
                self.was_ready = True
                log.info("zygote %d ready (%.0f MB heap); not preloaded: %s", self.pid,
                         self.data_mb, missing or "none")
            else:
                self.failure = str(message.get("why") or "unfit to fork")
                log.warning("zygote %d will fork nothing (%s): containers start as new "
                            "interpreters; not preloaded: %s", self.pid, self.failure,
                            missing or "none")
            self._settled.set()
