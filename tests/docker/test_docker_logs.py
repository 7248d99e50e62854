"""Function logs on the Docker backend: the runtime in the image captures what a handler
writes as it does in a process, and the gateway keeps it."""

from __future__ import annotations

import uuid

import docker
import pytest
from helpers import TEST_FUNCTIONS, TEST_NETWORK

pytestmark = pytest.mark.docker


def test_a_docker_containers_invocation_keeps_its_own_output(
        make_platform, docker_client: docker.DockerClient, runtime_image: str):
    node = f"test-{uuid.uuid4().hex[:8]}"
    # A network of its own, made before the platform: the backend's starts (a stem cell's and
    # a container's at once) can each make a missing one, and then neither can use it.
    network = docker_client.networks.create(f"{TEST_NETWORK}-{node}", driver="bridge").name
    platform = make_platform(backend="docker", redis_url=None, node_name=node,
                             docker_network=network, docker_image=runtime_image)
    try:
        with platform.client() as client:
            client.deploy({"name": "chatty", "handler": "fns:chatty", "cpu": 0.5,
                           "memory_mb": 256, "code_sha256": client.upload_code(TEST_FUNCTIONS)})
            rec = client.invoke("chatty", {"tag": "boxed"})
            assert rec["status"] == "success" and rec["backend"] == "docker", rec
            lines = client.invocation_logs(rec["id"]).splitlines()
            # The warning names the handler's file where the container unpacked it.
            assert lines[:2] == ["print boxed", "[INFO] chatty: log boxed"], lines
            assert lines[2].endswith(": UserWarning: warn boxed"), lines
            assert lines[4:] == ["thread boxed", "end boxed"], lines
            containers = client.function_logs("chatty")["containers"]
            assert [c["logs"] for c in containers] == ["chatty imported\n"]
    finally:
        platform.stop()
        for made in docker_client.networks.list(names=[network]):
            made.remove()
    assert docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"}) \
        == []
