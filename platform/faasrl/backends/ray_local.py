"""A one-node Ray cluster of the gateway's own, for ``faasrl up --backend ray`` with no address.

It runs as ``ray start --head --block`` in a child process whose environment is built afresh:
function containers are started by the cluster's workers, so the gateway's environment (its
token, cloud credentials) must not be the cluster's. Terminating that one process stops the
head's GCS, raylet and workers; Ray's reaper stops them too if the gateway is killed.

It listens on loopback only, as the gateway does: Ray replaces a ``--node-ip-address`` of
127.0.0.1 by the host's external address unless it runs as a single-node cluster
(``LOOPBACK_ONLY``), and with the node on 127.0.0.1 its GCS, raylet, workers, Ray Client server
and the function runtimes all bind there (no other node can join it then). Its files (sessions,
logs, sockets, the ``ray_current_cluster`` file a plain ``ray.init()`` reads) live in a private
temporary folder, removed when it stops, so it leaves nothing in Ray's shared ``/tmp/ray``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ray._private import ray_constants

from faasrl.backends.process import base_env, kill_group
from faasrl.redis_server import free_port

OBJECT_STORE_MB = 128  # faasrl moves data through Redis, not Ray's object store
_PASSED_PREFIX = "RAY_"  # Ray's own tuning variables go through
# Ray's single-node mode (its default on macOS and Windows): the node keeps 127.0.0.1.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# The driver's token auth mode, which a driver given an address takes from its environment
# only; `ray start` would turn token auth on by itself where ~/.ray/auth_token exists.
AUTH_MODE = "RAY_AUTH_MODE"
LOOPBACK = "127.0.0.1"


@contextmanager
def loopback_driver() -> Iterator[None]:
    """Around ``ray.init``: this process's driver keeps 127.0.0.1 for the cluster and itself
    (``LOOPBACK_ONLY``'s setting, read by Ray at import, so set here as Ray holds it)."""
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


class LocalRayCluster:
    def __init__(self, log_path: Path, *, cpu: float | None = None,
                 memory_mb: int | None = None, gpus: int | None = None):
        self._log_path = log_path
        self._resources = {"--num-cpus": None if cpu is None else max(1, int(cpu)),
                           "--memory": None if memory_mb is None else memory_mb * 2**20,
                           "--num-gpus": gpus}
        self._proc: subprocess.Popen[bytes] | None = None
        self.temp_dir: Path | None = None
        self.address = ""

    def start(self, timeout_s: float = 60.0) -> str:
        """Start the head and wait until its GCS answers; returns its address."""
        port = free_port()
        # Short and private: Ray's socket paths in it must stay under the OS's 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="faasrl-ray-"))
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
               f"--port={port}", f"--node-ip-address={LOOPBACK}",
               f"--ray-client-server-port={free_port()}",  # Ray's 10001 may be taken
               f"--temp-dir={self.temp_dir}", "--include-dashboard=false",
               "--disable-usage-stats", f"--object-store-memory={OBJECT_STORE_MB * 2**20}",
               "--block"]
        cmd += [f"{flag}={value}" for flag, value in self._resources.items() if value is not None]
        env = {AUTH_MODE: "disabled", **base_env(),
               **{k: v for k, v in os.environ.items() if k.startswith(_PASSED_PREFIX)},
               **LOOPBACK_ONLY}
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self.address = f"{LOOPBACK}:{port}"
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise RuntimeError(f"the local Ray cluster exited with {code}; "
                                   f"see {self._log_path}")
            try:
                with socket.create_connection((LOOPBACK, port), timeout=1):
                    return self.address
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local Ray cluster did not start within {timeout_s:g} s;"
                                   f" see {self._log_path}")
            time.sleep(0.2)

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop the head and everything it started (``ray start --block`` does on SIGTERM),
        then remove its files."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None
