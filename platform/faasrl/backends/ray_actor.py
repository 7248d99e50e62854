"""The Ray actor that hosts one function container that needs an actor of its own (a GPU one:
Ray assigns an actor its devices; one whose manifest asks to PACK; or any with no zygote actor
to host it, ``ray.hosted_by_zygote``): the faasrl runtime, forked by its node's zygote or started
as its own child process.

Ray places the actor on a node that has the function's resources; there the actor asks the
node's zygote actor (``ray_zygote``, when the gateway placed one) to fork the runtime, and else
starts ``python -m faasrl.runtime`` as the process backend does (a listening socket bound on the
node's address and inherited, the bearer secret through a pipe, a heap limit, death with its
parent); it reports where the runtime listens and waits for it to exit. The runtime's
environment is built afresh (``container_env``), so nothing of the raylet's or the actor's
environment reaches the function. Only JSON strings cross between the gateway and the actor.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from typing import Any

from faasrl.backends.process import exec_runtime, kill_group, owner_label
from faasrl.backends.ray_node import NodeSetup, log_tail, set_up, stats_json
from faasrl.backends.ray_zygote import zygote_name


class RuntimeActor:
    """One container on one Ray node. Threaded (``max_concurrency`` > 1): ``wait_exit`` blocks
    for the container's life while ``stop``, ``stats`` and ``logs`` are answered."""

    def __init__(self, container_id: str) -> None:
        from faasrl.runtime.__main__ import no_peeking

        no_peeking()  # the function runs as this user: keep it out of this process's memory
        self._id = container_id
        self._setup: NodeSetup | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._forked: tuple[int, Any] | None = None  # its pid and the zygote actor's handle

    def start(self, config: str) -> str:
        """Start the runtime; ``config``: JSON with ``cpu``, ``memory_mb``, ``gpu``,
        ``workdir`` and ``layers`` (``ray_node.set_up``) and ``zygote`` (the prefix of the node's
        zygote actor's name, ``zygote_name``; null: none). Answers JSON: ``host``, ``port``,
        ``pid``, ``node_id``, the runtime's ``secret`` and ``unforked`` (why it was not forked
        from the zygote but started as a new interpreter; null: it was)."""
        import ray

        cfg = json.loads(config)
        gpus = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        self._setup = setup = set_up(self._id, cfg, gpus)
        forked: tuple[int, int, str] | str = "zygotes are off"
        if cfg.get("zygote"):
            forked = self._fork(zygote_name(cfg["zygote"], setup.node_id), setup,
                                cfg["memory_mb"])
        if isinstance(forked, tuple):
            pid, port, secret = forked
        else:
            self._proc, port, secret = exec_runtime(sys.executable, setup.env, setup.cwd,
                                                    cfg["memory_mb"], setup.log,
                                                    host=setup.host)
            pid = self._proc.pid
        return json.dumps({"host": setup.host, "port": port, "pid": pid, "secret": secret,
                           "node_id": setup.node_id,
                           "unforked": None if isinstance(forked, tuple) else forked})

    def _fork(self, name: str, setup: NodeSetup, memory_mb: int) -> tuple[int, int, str] | str:
        """The runtime forked by the node's zygote actor: its pid, port and secret; or why it
        was not (start a new interpreter)."""
        import ray

        request = {"id": self._id, "env": setup.env, "cwd": str(setup.cwd),
                   "memory_mb": memory_mb, "log": str(setup.log), "host": setup.host,
                   "owner": owner_label()}
        try:
            zygote = ray.get_actor(name, namespace=ray.get_runtime_context().namespace)
            out = json.loads(ray.get(zygote.fork.remote(json.dumps(request))))
        except Exception as exc:  # no zygote actor here, or it died: a new interpreter
            out = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
        if "error" in out:
            return str(out["error"])
        self._forked = out["pid"], zygote
        return out["pid"], out["port"], out["secret"]

    @property
    def _pid(self) -> int | None:
        return self._forked[0] if self._forked else self._proc.pid if self._proc else None

    def wait_exit(self) -> int:
        """Block until the runtime exits; its exit status (-SIGKILL: its zygote died)."""
        import ray

        if self._forked is not None:
            pid, zygote = self._forked
            try:
                return int(ray.get(zygote.wait_exit.remote(pid)))
            except ray.exceptions.RayError:  # the zygote's death killed it
                return -signal.SIGKILL
        if self._proc is None:
            return -1
        return self._proc.wait()

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the runtime's process group, SIGKILL after ``grace_s``; then its files."""
        import ray

        if self._forked is not None:
            pid, zygote = self._forked
            try:
                ray.get(zygote.stop.remote(pid, grace_s), timeout=grace_s + 5.0)
            except ray.exceptions.RayError:
                kill_group(pid, signal.SIGKILL)
        elif self._proc is not None and self._proc.poll() is None:
            kill_group(self._proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace_s)
            kill_group(self._proc.pid, signal.SIGKILL)  # the rest of its group too
            self._proc.wait()
        if self._setup is not None:
            self._setup.remove()

    def stats(self) -> str:
        """JSON ``{"memory_mb", "cpu_s"}`` of the runtime, or null once it is gone."""
        return stats_json(self._pid)

    def logs(self, tail: int) -> str:
        return log_tail(self._setup.log, tail) if self._setup is not None else ""
