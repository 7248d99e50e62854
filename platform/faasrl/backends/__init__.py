"""Where containers come from: one interface (``Backend``), one module per backend."""

from __future__ import annotations

from pathlib import Path

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats


def create_backend(name: str, state_dir: Path) -> Backend:
    if name == "process":
        from faasrl.backends.process import ProcessBackend

        return ProcessBackend(state_dir)
    raise ValueError(f"unknown backend {name!r}")


__all__ = ["Backend", "ContainerHandle", "ContainerStats", "create_backend"]
