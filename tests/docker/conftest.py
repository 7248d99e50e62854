"""Docker tests: a real engine and the faasrl images; skipped, saying why, where either is
missing (CI makes both: `make docker-engine images`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import docker
import pytest
from helpers import TEST_NETWORK

RUNTIME_IMAGE = "faasrl/runtime:latest"
PLATFORM_IMAGE = "faasrl/platform:latest"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # no socket, no permission, no daemon: all mean no engine here
        pytest.skip(f"no Docker engine reachable ({exc}); run 'make docker-engine'")
    yield client
    for network in client.networks.list(names=[TEST_NETWORK]):
        with contextlib.suppress(docker.errors.APIError):  # still in use: leave it
            network.remove()
    client.close()


def require_image(client: docker.DockerClient, image: str) -> None:
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {image} is not built; run 'make images'")


@pytest.fixture(scope="session")
def runtime_image(docker_client: docker.DockerClient) -> str:
    require_image(docker_client, RUNTIME_IMAGE)
    return RUNTIME_IMAGE


@pytest.fixture(scope="session")
def platform_image(docker_client: docker.DockerClient) -> str:
    require_image(docker_client, PLATFORM_IMAGE)
    return PLATFORM_IMAGE
