"""Node capacity: cores, memory and GPUs, and the arithmetic to reserve them per container."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

_EPS = 1e-9


@dataclass(frozen=True)
class Resources:
    """An amount of node capacity; containers reserve their function's amount for their lifetime."""

    cpu: float = 0.0
    memory_mb: int = 0
    gpus: float = 0  # a fraction < 1 is part of one device (see ``gpu_share``)

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory_mb + other.memory_mb,
                         self.gpus + other.gpus)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory_mb - other.memory_mb,
                         self.gpus - other.gpus)

    def covers(self, need: Resources) -> bool:
        return (self.cpu + _EPS >= need.cpu and self.memory_mb >= need.memory_mb
                and self.gpus + _EPS >= need.gpus)

    def floor_zero(self) -> Resources:
        return Resources(max(self.cpu, 0.0), max(self.memory_mb, 0), max(self.gpus, 0))

    def shortfall(self, need: Resources) -> dict[str, str]:
        """Per manifest field, how ``need`` exceeds this amount (empty when it fits)."""
        out = {}
        if need.cpu > self.cpu + _EPS:
            out["cpu"] = f"{need.cpu:g} cores requested, {self.cpu:g} available"
        if need.memory_mb > self.memory_mb:
            out["memory_mb"] = f"{need.memory_mb} MB requested, {self.memory_mb} available"
        if need.gpus > self.gpus + _EPS:
            out["gpu"] = f"{need.gpus:g} GPUs requested, {self.gpus:g} available"
        return out


def discover_gpus() -> list[int]:
    """GPU indices NVML reports; no driver, no library or no GPU all mean an empty list."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        return list(range(pynvml.nvmlDeviceGetCount()))
    except Exception:
        return []
    finally:
        pynvml.nvmlShutdown()


def whole_cores(cores: float) -> float:
    """The whole cores in ``cores``, a float's rounding forgiven as ``covers`` forgives it."""
    return float(math.floor(cores + _EPS))


def host_cores() -> float:
    """The cores this process may run on."""
    return float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)


def node_capacity(cpu: float | None, memory_mb: int | None,
                  gpus: int | None) -> tuple[Resources, list[int]]:
    """The capacity this node hands out and its GPU indices; ``None`` means what the host has."""
    if cpu is None:
        cpu = host_cores()
    if memory_mb is None:
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    found = discover_gpus()
    gpu_ids = found if gpus is None else (found[:gpus] if found else list(range(gpus)))
    return Resources(cpu, memory_mb, len(gpu_ids)), gpu_ids
