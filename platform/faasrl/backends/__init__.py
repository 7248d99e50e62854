"""Where containers come from: one interface (``Backend``), one module per backend."""

from __future__ import annotations

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats
from faasrl.config import Settings


def create_backend(settings: Settings) -> Backend:
    """The node's backend, ``settings.backend`` (``FAASRL_BACKEND``)."""
    if settings.backend == "process":
        from faasrl.backends.process import ProcessBackend

        return ProcessBackend(settings.state_dir, user=settings.function_user,
                              python=settings.function_python, zygote=settings.zygote)
    if settings.backend == "docker":
        from faasrl.backends.docker import DockerBackend, DockerConfig

        return DockerBackend(DockerConfig(
            node=settings.node_name, image=settings.docker_image,
            gpu_image=settings.docker_gpu_image, network=settings.docker_network,
            functions_dir=settings.functions_dir, builtins_dir=settings.docker_builtins_dir,
            pids_limit=settings.docker_pids_limit, tmpfs_mb=settings.docker_tmpfs_mb))
    raise ValueError(f"unknown backend {settings.backend!r}")


__all__ = ["Backend", "ContainerHandle", "ContainerStats", "create_backend"]
