"""What a Ray container needs on its node before its runtime starts, wherever it is hosted: by
an actor of its own (``ray_actor.RuntimeActor``) or by its node's zygote actor
(``ray_zygote.ZygoteActor``), which forks it with no actor of its own."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasrl.backends.process import container_env, process_stats
from faasrl.env_layers import LAYERS_ENV


@dataclass(frozen=True)
class NodeSetup:
    """A container's place on its node: where its runtime listens and runs, and its files."""

    host: str  # the node's address, that the runtime's socket binds
    node_id: str  # the Ray node's id
    env: dict[str, str]  # the runtime's environment, built afresh (``container_env``)
    cwd: Path  # the built-in function's folder, or ``tmp``
    tmp: Path  # its HOME and TMPDIR, removed when it stops
    log: Path  # its runtime's output, removed when it stops

    def remove(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.log.unlink(missing_ok=True)


def set_up(container_id: str, config: dict[str, Any], gpus: Sequence[str] = ()) -> NodeSetup:
    """``config``: ``cpu``, ``gpu``, ``workdir`` (the built-in function's folder on this node,
    or null) and ``layers`` (the folder of env layers, on a local cluster; else null)."""
    import ray

    host = ray.util.get_node_ip_address()
    workdir = config.get("workdir")
    if workdir and not Path(workdir).is_dir():
        raise FileNotFoundError(f"no folder {workdir} on the Ray node {host} (the built-in "
                                "functions must be there: FAASRL_RAY_BUILTINS_DIR)")
    tmp = Path(tempfile.mkdtemp(prefix=f"faasrl-{container_id}-"))
    env = container_env(config["cpu"], container_id, gpus, tmp, gpu=config["gpu"])
    if config.get("layers"):
        env[LAYERS_ENV] = config["layers"]
    return NodeSetup(host, ray.get_runtime_context().get_node_id(), env, Path(workdir or tmp),
                     tmp, tmp.parent / f"faasrl-{container_id}.log")


def stats_json(pid: int | None) -> str:
    """JSON ``{"memory_mb", "cpu_s"}`` of a container's runtime, or null once it is gone."""
    sample = process_stats(pid) if pid is not None else None
    return json.dumps(dataclasses.asdict(sample) if sample is not None else None)


def log_tail(log: Path, lines: int) -> str:
    try:
        with open(log, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError:
        return ""
