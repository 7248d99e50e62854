"""A fractional GPU (``gpu: 0.25``): the environment a backend gives such a container, and the
memory limit its runtime applies once the function has imported torch.

Containers that share one device are held to their fraction of its memory by torch's caching
allocator (``set_per_process_memory_fraction``: an allocation beyond it raises CUDA's
out-of-memory error), and to their fraction of its streaming multiprocessors by NVIDIA MPS where
an MPS control daemon runs on the host (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``); without MPS
they time-share the device's compute.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

FRACTION_ENV = "FAASRL_GPU_FRACTION"  # the share of its one device a container may use
MPS_PERCENTAGE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
_MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"  # the control daemon's pipe folder unless configured


def mps_running() -> bool:
    """Whether an MPS control daemon listens on this host (its control pipe exists)."""
    folder = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or _MPS_PIPE_DEFAULT
    return (Path(folder) / "control").exists()


def share_env(gpu: float, mps: bool | None = None) -> dict[str, str]:
    """The environment of a container of ``gpu`` (its manifest's field) beyond its devices:
    nothing for whole GPUs (or none); its fraction, and MPS's thread percentage where ``mps``
    (found on this host when not given), for a part of one device."""
    if not 0 < gpu < 1:
        return {}
    env = {FRACTION_ENV: f"{gpu:g}"}
    if mps_running() if mps is None else mps:
        env[MPS_PERCENTAGE_ENV] = f"{max(1, round(gpu * 100))}"
    return env


def limit_memory() -> float | None:
    """Hold this process to its fraction of its device's memory, where it has one and the
    function imported torch and sees CUDA (a function that does not use torch never imports it
    for this); the fraction applied, else None."""
    fraction = os.environ.get(FRACTION_ENV)
    torch = sys.modules.get("torch")
    if not fraction or torch is None or not torch.cuda.is_available():
        return None
    torch.cuda.set_per_process_memory_fraction(float(fraction), 0)
    return float(fraction)
