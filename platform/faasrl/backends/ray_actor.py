"""The Ray actor that hosts one function container: the faasrl runtime as its child process.

Ray places the actor on a node that has the function's resources; there the actor starts
``python -m faasrl.runtime`` as the process backend does (a listening socket bound on the node's
address and inherited, the bearer secret through a pipe, a heap limit, death with its parent),
reports where it listens, and waits for it to exit. The runtime's environment is built afresh
(``base_env``), so nothing of the raylet's or the actor's environment reaches the function.
Only JSON strings cross between the gateway and the actor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

from faasrl.backends.process import container_env, exec_runtime, kill_group, process_stats
from faasrl.env_layers import LAYERS_ENV


class RuntimeActor:
    """One container on one Ray node. Threaded (``max_concurrency`` > 1): ``wait_exit`` blocks
    for the container's life while ``stop``, ``stats`` and ``logs`` are answered."""

    def __init__(self, container_id: str) -> None:
        from faasrl.runtime.__main__ import no_peeking

        no_peeking()  # the function runs as this user: keep it out of this process's memory
        self._id = container_id
        self._tmp = Path(tempfile.mkdtemp(prefix=f"faasrl-{container_id}-"))
        self._log = self._tmp.parent / f"faasrl-{container_id}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, config: str) -> str:
        """Start the runtime; ``config``: JSON with ``cpu``, ``memory_mb``, ``workdir`` (the
        built-in function's folder on this node, or null) and ``layers`` (the folder of env
        layers, on a local cluster; else null). Answers JSON: ``host``,
        ``port``, ``pid``, ``node_id`` and the runtime's ``secret``."""
        import ray

        cfg = json.loads(config)
        host = ray.util.get_node_ip_address()
        workdir = cfg.get("workdir")
        if workdir and not Path(workdir).is_dir():
            raise FileNotFoundError(f"no folder {workdir} on the Ray node {host} (the built-in "
                                    "functions must be there: FAASRL_RAY_BUILTINS_DIR)")
        gpus = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        env = container_env(cfg["cpu"], self._id, gpus, self._tmp, gpu=cfg["gpu"])
        if cfg.get("layers"):
            env[LAYERS_ENV] = cfg["layers"]
        self._proc, port, secret = exec_runtime(sys.executable, env, Path(workdir or self._tmp),
                                                cfg["memory_mb"], self._log, host=host)
        return json.dumps({"host": host, "port": port, "pid": self._proc.pid, "secret": secret,
                           "node_id": ray.get_runtime_context().get_node_id()})

    def wait_exit(self) -> int:
        """Block until the runtime exits; its exit status."""
        if self._proc is None:
            return -1
        return self._proc.wait()

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the runtime's process group, SIGKILL after ``grace_s``; then its files."""
        if self._proc is not None and self._proc.poll() is None:
            kill_group(self._proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace_s)
            kill_group(self._proc.pid, signal.SIGKILL)  # the rest of its group too
            self._proc.wait()
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._log.unlink(missing_ok=True)

    def stats(self) -> str:
        """JSON ``{"memory_mb", "cpu_s"}`` of the runtime, or null once it is gone."""
        sample = process_stats(self._proc.pid) if self._proc is not None else None
        return json.dumps(dataclasses.asdict(sample) if sample is not None else None)

    def logs(self, tail: int) -> str:
        try:
            with open(self._log, errors="replace") as f:
                return "".join(deque(f, maxlen=tail))
        except OSError:
            return ""
