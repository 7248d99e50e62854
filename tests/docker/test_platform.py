"""A whole platform on the Docker backend: the embedded Redis reached over the bridge, code
uploaded from a folder, a container killed mid-invocation."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest
import redis
from helpers import wait_for

from faasrl.client import GatewayError

pytestmark = pytest.mark.docker

HANDLER = '''
import os, time
import redis

def main(args, context):
    r = redis.Redis.from_url(os.environ["FAASRL_REDIS_URL"])
    r.set("written-by-" + args["key"], os.getuid())
    time.sleep(args.get("sleep_s", 0))
    return {"uid": os.getuid(), "container": os.environ["FAASRL_CONTAINER_ID"]}
'''


@pytest.fixture
def docker_platform(make_platform, docker_client: docker.DockerClient, runtime_image: str):
    node = f"test-{uuid.uuid4().hex[:8]}"
    platform = make_platform(backend="docker", redis_url=None, node_name=node,
                             docker_network="faasrl-test", docker_image=runtime_image)
    yield platform
    platform.stop()
    left = docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"})
    assert left == []  # the gateway stopped every container it started


@pytest.fixture
def uploaded(docker_platform, tmp_path: Path):
    folder = tmp_path / "writer"
    folder.mkdir()
    (folder / "manifest.yaml").write_text("name: writer\nhandler: handler:main\ncpu: 0.5\n"
                                          "memory_mb: 256\n")
    (folder / "handler.py").write_text(HANDLER)
    with docker_platform.client() as client:
        client.deploy(folder)
        yield client


def test_uploaded_function_reaches_the_embedded_redis(docker_platform, uploaded):
    cold = uploaded.invoke("writer", {"key": "a"})
    assert cold["status"] == "success", cold
    assert cold["cold"] is True and cold["backend"] == "docker"
    assert cold["result"]["uid"] == 10001
    warm = uploaded.invoke("writer", {"key": "b"})
    assert warm["cold"] is False and warm["result"] == cold["result"]
    with redis.Redis.from_url(docker_platform.redis_url) as r:
        assert r.get("written-by-a") == b"10001" and r.get("written-by-b") == b"10001"
    [container] = uploaded.cluster()["functions"]["writer"]["containers"]
    assert container["endpoint"].endswith(":8080")


def test_a_killed_container_is_replaced_and_the_invocation_retried(uploaded, docker_client):
    invocation = uploaded.invoke_async("writer", {"key": "k", "sleep_s": 2})
    busy = wait_for(lambda: [c for c in uploaded.cluster()["functions"]["writer"]["containers"]
                             if c["state"] == "busy"], 60, "a busy container")
    [victim] = docker_client.containers.list(filters={"label": f"faasrl.container={busy[0]['id']}"})
    victim.kill()
    rec = uploaded.wait(invocation, timeout_s=60)
    assert rec["status"] == "success" and rec["attempts"] == 2
    assert rec["result"]["container"] != busy[0]["id"]


def test_a_folder_only_on_the_gateways_host_is_refused(docker_platform, tmp_path: Path):
    with docker_platform.client() as client, pytest.raises(GatewayError) as err:
        client.deploy({"name": "local", "handler": "handler:main", "code_dir": str(tmp_path)})
    assert err.value.status == 422 and "code_dir" in err.value.fields
