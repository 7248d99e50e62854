"""``python -m faasrl.runtime.zygote``: a process that has imported what functions import (torch,
gymnasium, ...) and forks a container's runtime on request, so a cold start skips the imports.

It talks to the process backend over an inherited ``SOCK_SEQPACKET`` socket (one JSON object per
message; never pickle):

- it sends ``{"ready": true, "data_mb", "imported", "failed"}`` once its imports are done, or
  ``{"ready": false, "why", "failed"}`` and exits when a fork of it would not work (``failed``:
  per module it could not import, why);
- ``{"op": "fork", "id", "env", "cwd", "memory_mb"}`` with three fds (the listening socket, the
  secret's pipe, the log file) answers ``{"id", "pid"}`` or ``{"id", "error"}``;
- when a child exits it sends ``{"exit": pid, "status": n}`` (``-signal`` if killed) but leaves
  it a zombie, so its process group id stays the backend's to signal, until
  ``{"op": "reap", "pid"}``;
- end of file: the backend is gone or done; it kills its children's groups and exits.

It is the parent of every container it forks: each one's parent-death signal fires when the
zygote dies, and the zygote's own when the gateway dies, so nothing outlives the gateway.
Fork safety: nothing here runs a torch op or opens a connection, so no thread pool, CUDA context
or socket exists to be inherited; it checks that it is single-threaded, with CUDA untouched, and
that no failed import left modules half-imported (a container would import them again and fail
where a new interpreter would not), before it says ready.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import selectors
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faasrl.runtime.__main__ import die_with_parent, no_peeking, serve
from faasrl.runtime.preload import blas_setters, preload, size_threads
from faasrl.runtime.server import status_mb

MAX_MESSAGE = 1 << 20


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def exited(pid: int) -> int | None:
    """Exit status of our child (minus the signal that killed it, as ``Popen.returncode``;
    -1: already reaped), None while it runs; without reaping it, so that its process group id
    stays addressable."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return -1
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _unsafe_to_fork(half_imported: Sequence[str]) -> str | None:
    """Why a fork of this process would not be a working copy: a child gets only the forking
    thread (any other's locks stay held), CUDA cannot be used again after a fork, and a module
    whose import failed halfway fails again, differently, when a child imports it."""
    if half_imported:
        return f"a failed import left {', '.join(half_imported)} half-imported"
    if (threads := len(os.listdir("/proc/self/task"))) > 1:
        return f"{threads} threads after the imports"
    if (torch := sys.modules.get("torch")) is not None and torch.cuda.is_initialized():
        return "CUDA initialized by the imports"
    return None


@dataclass
class _Child:
    status: int | None = None  # set once its exit was reported
    reap: bool = False  # the backend is done with it


class ZygoteServer:
    """The zygote's end of the control socket: forks runtimes, reports and reaps their exits."""

    def __init__(self, control: socket.socket, blas: list[Any]):
        self._control = control
        self._blas = blas
        self._children: dict[int, _Child] = {}
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._selector = selectors.DefaultSelector()
        self._selector.register(control, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._cwd = os.getcwd()
        self._pid = os.getpid()

    def serve(self) -> None:
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector up
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._control:
                    data, fds, _, _ = socket.recv_fds(self._control, MAX_MESSAGE, 3)
                    if not data:
                        self._shut_down()
                        return
                    self._handle(json.loads(data), fds)
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
            self._collect()

    def _handle(self, message: dict[str, Any], fds: list[int]) -> None:
        if message.get("op") == "fork" and len(fds) == 3:
            self._fork(message, *fds)
            return
        for fd in fds:
            os.close(fd)
        if message.get("op") == "reap" and (child := self._children.get(message["pid"])):
            child.reap = True

    def _fork(self, request: dict[str, Any], listen_fd: int, secret_fd: int, log_fd: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            send(self._control, {"id": request["id"], "error": str(exc)})
            pid = -1
        if pid == 0:  # never returns to the zygote's loop; exits as an interpreter would
            code = 1
            try:
                self._become(request, listen_fd, secret_fd, log_fd)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in (listen_fd, secret_fd, log_fd):
            os.close(fd)
        if pid > 0:
            self._children[pid] = _Child()
            send(self._control, {"id": request["id"], "pid": pid})

    def _collect(self) -> None:
        """Report exits (once each), reap the children the backend is done with."""
        for pid, child in list(self._children.items()):
            if child.status is None:
                if (status := exited(pid)) is None:
                    continue
                child.status = status
                send(self._control, {"exit": pid, "status": status})
            if child.reap:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                del self._children[pid]

    def _shut_down(self) -> None:
        for pid in self._children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in self._children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def _become(self, request: dict[str, Any], listen_fd: int, secret_fd: int,
                log_fd: int) -> None:
        """In the child: turn into what ``python -m faasrl.runtime`` would have been."""
        die_with_parent(self._pid)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self._selector.close()
        self._control.close()
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        low = 3  # nothing of the zygote's survives but the two fds this container owns
        for fd in sorted((listen_fd, secret_fd)):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        if sys.path and sys.path[0] == self._cwd:  # ``-m`` puts the working folder first
            sys.path[0] = request["cwd"]
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # found again from the new TMPDIR
        _reseed_and_size(int(request["env"].get("OMP_NUM_THREADS") or 0), self._blas)
        serve(listen_fd=listen_fd, secret_fd=secret_fd, memory_mb=request["memory_mb"])


def _reseed_and_size(threads: int, blas: list[Any]) -> None:
    """A child must not replay its siblings' random numbers, and its numeric libraries must use
    its own thread count, not the zygote's one (they read the environment at import)."""
    random.seed()
    if (np := sys.modules.get("numpy")) is not None:
        np.random.seed()
    if (torch := sys.modules.get("torch")) is not None:
        torch.seed()
    if threads:
        size_threads(threads, blas)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m faasrl.runtime.zygote", description=__doc__)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    no_peeking()  # the secrets' pipes pass through here
    control = socket.socket(fileno=args.control_fd)
    imported, failed, half_imported = preload()
    for name, why in failed.items():
        print(f"faasrl zygote: {name} not preloaded ({why})", flush=True)
    if (unsafe := _unsafe_to_fork(half_imported)) is not None:
        print(f"faasrl zygote: forking is unsafe: {unsafe}", flush=True)
        send(control, {"ready": False, "why": unsafe, "failed": failed})
        sys.exit(1)
    send(control, {"ready": True, "data_mb": status_mb("VmData") or 0.0, "imported": imported,
                   "failed": failed})
    print(f"faasrl zygote ready (pid {os.getpid()}, {len(imported)} modules)", flush=True)
    ZygoteServer(control, blas_setters()).serve()


if __name__ == "__main__":
    main()
