"""Where containers come from: one interface (``Backend``), one module per backend."""

from __future__ import annotations

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats
from faasrl.config import Settings


def create_backend(settings: Settings) -> Backend:
    """The node's backend, ``settings.backend`` (``FAASRL_BACKEND``)."""
    if settings.backend == "process":
        from faasrl.backends.process import ProcessBackend

        return ProcessBackend(settings.state_dir, user=settings.function_user,
                              python=settings.function_python, zygote=settings.zygote,
                              env_layers_dir=settings.env_layers_folder)
    if settings.backend == "docker":
        from faasrl.backends.docker import DockerBackend, DockerConfig

        return DockerBackend(DockerConfig(
            node=settings.node_name, image=settings.docker_image,
            gpu_image=settings.docker_gpu_image, network=settings.docker_network,
            functions_dir=settings.functions_dir, builtins_dir=settings.docker_builtins_dir,
            pids_limit=settings.docker_pids_limit, tmpfs_mb=settings.docker_tmpfs_mb,
            env_layers_dir=settings.env_layers_folder,
            env_layers_source=settings.docker_env_layers_source))
    if settings.backend == "ray":
        from faasrl.backends.ray import RayBackend, RayConfig

        return RayBackend(RayConfig(
            node=settings.node_name, address=settings.ray_address,
            namespace=settings.ray_namespace, functions_dir=settings.functions_dir,
            builtins_dir=settings.ray_builtins_dir, log_dir=settings.state_dir / "logs",
            local_cpu=settings.node_cpu, local_memory_mb=settings.node_memory_mb,
            local_gpus=settings.node_gpus, env_layers_dir=settings.env_layers_folder))
    raise ValueError(f"unknown backend {settings.backend!r}")


__all__ = ["Backend", "ContainerHandle", "ContainerStats", "create_backend"]
