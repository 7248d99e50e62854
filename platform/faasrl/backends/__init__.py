"""Where containers come from: one interface (``Backend``), one module per backend, registered
by name in :data:`BACKENDS` (a node's ``FAASRL_BACKEND`` takes exactly those names); FaaS
services that run whole invocations (AWS Lambda) in :data:`SERVICES`, by placement.

Entries are registered by import path, so a node imports only its own backend's SDK (docker,
ray, boto3). Adding a backend is its module, a class with ``from_settings`` and one line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from faasrl.backends.base import Backend, ContainerHandle, ContainerStats
from faasrl.backends.service import ServiceBackend
from faasrl.registry import Registry

if TYPE_CHECKING:
    from faasrl.config import Settings


@runtime_checkable
class BackendFactory(Protocol):
    """A registered container backend: a :class:`Backend` subclass made from the settings."""

    def from_settings(self, settings: Settings) -> Backend: ...


@runtime_checkable
class ServiceFactory(Protocol):
    """A registered service backend: a :class:`ServiceBackend` subclass whose ``name`` is its
    placement, made from the settings and the Redis URL its functions reach."""

    name: str

    def from_settings(self, settings: Settings, redis_url: str) -> ServiceBackend: ...


BACKENDS: Registry[BackendFactory] = Registry("backend")
BACKENDS.register("process", "faasrl.backends.process:ProcessBackend")
BACKENDS.register("docker", "faasrl.backends.docker:DockerBackend")
BACKENDS.register("ray", "faasrl.backends.ray:RayBackend")

SERVICES: Registry[ServiceFactory] = Registry("placement")
SERVICES.register("lambda", "faasrl.backends.aws_lambda:LambdaBackend")

BackendName = BACKENDS.literal()  # the settings' ``backend``


def create_backend(settings: Settings) -> Backend:
    """The node's backend, ``settings.backend`` (``FAASRL_BACKEND``)."""
    return BACKENDS.require(settings.backend).from_settings(settings)


def create_services(settings: Settings, redis_url: str) -> dict[str, ServiceBackend]:
    """Every service backend, by placement; their functions reach Redis at ``redis_url``."""
    return {name: SERVICES[name].from_settings(settings, redis_url) for name in SERVICES}


__all__ = ["BACKENDS", "SERVICES", "Backend", "BackendFactory", "BackendName", "ContainerHandle",
           "ContainerStats", "ServiceFactory", "create_backend", "create_services"]
