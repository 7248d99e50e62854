"""Docker tests: a real engine and the faasrl images; skipped, saying why, where either is
missing (CI makes both: `make docker-engine images`)."""

from __future__ import annotations

import os

import docker
import pytest

# FAASRL_TEST_RUNTIME_IMAGE: a runtime image built from this checkout under another tag
# (`IMAGE_TAG=mine images/build.sh runtime`), where several checkouts share one engine.
RUNTIME_IMAGE = os.environ.get("FAASRL_TEST_RUNTIME_IMAGE", "faasrl/runtime:latest")
PLATFORM_IMAGE = "faasrl/platform:latest"


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
