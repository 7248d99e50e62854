"""A one-node Ray cluster of the gateway's own, for ``faasrl up --backend ray`` with no address.

It runs as ``ray start --head --block`` in a child process whose environment is built afresh:
function containers are started by the cluster's workers, so the gateway's environment (its
token, cloud credentials) must not be the cluster's. Terminating that one process stops the
head's GCS, raylet and workers; Ray's reaper stops them too if the gateway is killed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from faasrl.backends.process import base_env, kill_group
from faasrl.redis_server import free_port

OBJECT_STORE_MB = 128  # faasrl moves data through Redis, not Ray's object store
_PASSED_PREFIX = "RAY_"  # Ray's own tuning variables go through


class LocalRayCluster:
    def __init__(self, log_path: Path, *, cpu: float | None = None,
                 memory_mb: int | None = None, gpus: int | None = None):
        self._log_path = log_path
        self._resources = {"--num-cpus": None if cpu is None else max(1, int(cpu)),
                           "--memory": None if memory_mb is None else memory_mb * 2**20,
                           "--num-gpus": gpus}
        self._proc: subprocess.Popen[bytes] | None = None
        self.address = ""

    def start(self, timeout_s: float = 60.0) -> str:
        """Start the head and wait until its GCS answers; returns its address."""
        port = free_port()
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
               f"--port={port}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
               "--disable-usage-stats", f"--object-store-memory={OBJECT_STORE_MB * 2**20}",
               "--block"]
        cmd += [f"{flag}={value}" for flag, value in self._resources.items() if value is not None]
        env = {**base_env(), **{k: v for k, v in os.environ.items()
                                if k.startswith(_PASSED_PREFIX)}}
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self.address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the local Ray cluster exited with {self._proc.returncode}; "
                                   f"see {self._log_path}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return self.address
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local Ray cluster did not start within {timeout_s:g} s;"
                                   f" see {self._log_path}")
            time.sleep(0.2)

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop the head and everything it started (``ray start --block`` does on SIGTERM)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
