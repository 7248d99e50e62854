"""What a runtime imports before it knows its function, so that a cold start skips the imports:
the process backend's zygote (before it forks) and the Docker backend's stem cells (before
``/init``) share this list, and the thread sizing a process needs once it learns its cores.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import sys
from typing import Any, NamedTuple

# What the built-in functions (functions/*/handler.py) import; a module that fails to import is
# left to the function, which then imports it itself as it would without a preload.
# torch._dynamo: every torch optimizer imports it when first built (1.5 s, a learner's first
# update), though no handler names it.
PRELOAD = (
    "numpy", "torch", "torch._dynamo", "gymnasium", "safetensors", "redis", "pydantic",
    "faasrl.algorithms", "faasrl.algorithms.offpolicy", "faasrl.contracts",
    "faasrl.data.codec", "faasrl.data.connection", "faasrl.data.gradients", "faasrl.data.keys",
    "faasrl.data.params", "faasrl.data.trajectories", "faasrl.rl.aggregation",
    "faasrl.rl.diagnostics", "faasrl.rl.envs", "faasrl.rl.envpool_envs", "faasrl.rl.explore",
    "faasrl.rl.hessian",
    "faasrl.rl.policy", "faasrl.rl.replay", "faasrl.rl.rollout", "faasrl.rl.seeds",
    "faasrl.runtime.server",
)


class Preloaded(NamedTuple):
    imported: list[str]
    failed: dict[str, str]  # per module that failed to import, why
    # The failed modules whose import raised midway (not for a missing module) and left some
    # of theirs behind in ``sys.modules``: importing them again in this process (or a fork of
    # it) runs what their failed import had done once more, which fails where a new
    # interpreter's import would not (torch._dynamo: "Artifact of type=precompile already
    # registered"). A missing library fails the same in a new interpreter: not counted.
    half_imported: list[str]


def preload() -> Preloaded:
    """Import ``PRELOAD``: what was imported, what failed and why, and what a failure left
    half-imported."""
    imported, failed, half = [], {}, []
    gc.disable()  # as the runtime's handler import: no full collections on the way
    try:
        for name in PRELOAD:
            before = set(sys.modules)
            try:
                importlib.import_module(name)
                imported.append(name)
            except Exception as exc:  # a missing or broken library: the function's business
                failed[name] = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, ModuleNotFoundError) and set(sys.modules) - before:
                    half.append(name)
    finally:
        gc.enable()
        gc.freeze()  # long-lived: keep the collector (and a zygote's children's) off them
    return Preloaded(imported, failed, half)


def blas_setters() -> list[Any]:
    """The thread-count setters of the OpenBLAS libraries loaded here (numpy's), which sized
    their pools when imported; found once, called when the process learns its cores."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
    setters = []
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, name):
                setters.append(getattr(lib, name))
                break
    return setters


def thread_env(cpu: float) -> dict[str, str]:
    """Sizes numeric libraries' thread pools to a container's cores (they size them at import:
    one thread for a process that imports before it forks or is specialised)."""
    threads = str(max(1, int(cpu)))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def size_threads(threads: int, blas: list[Any] | None = None) -> None:
    """Size the thread pools of numeric libraries imported before ``OMP_NUM_THREADS`` was the
    process's own (they read it at import): torch's, and OpenBLAS's (``blas``: from
    ``blas_setters``, found here when not given); and those imported later, through it."""
    os.environ.update(thread_env(threads))
    if (torch := sys.modules.get("torch")) is not None:
        torch.set_num_threads(threads)
    for set_threads in blas if blas is not None else blas_setters():
        set_threads(threads)
