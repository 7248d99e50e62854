"""A whole platform on the Docker backend: the embedded Redis reached over the bridge as a job's
user, code uploaded from a folder, a container killed mid-invocation, and what a function
container can reach (its job's keys only, no other runtime)."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest
import redis
from helpers import TEST_FUNCTIONS, TEST_NETWORK, wait_for

from faasrl.client import GatewayError
from faasrl.data import acl

pytestmark = pytest.mark.docker

HANDLER = '''
import os, time
from faasrl.data.connection import function_redis

def main(args, context):
    function_redis(args["job"]).set(f"faasrl:job:{args['job']['id']}:" + args["key"], os.getuid())
    time.sleep(args.get("sleep_s", 0))
    return {"uid": os.getuid(), "container": os.environ["FAASRL_CONTAINER_ID"]}
'''


@pytest.fixture
def docker_platform(make_platform, docker_client: docker.DockerClient, runtime_image: str):
    node = f"test-{uuid.uuid4().hex[:8]}"
    platform = make_platform(backend="docker", redis_url=None, node_name=node,
                             docker_network=TEST_NETWORK, docker_image=runtime_image)
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
    job = {"id": "dj", "redis": acl.grant_new(docker_platform.redis_url, "dj")}
    cold = uploaded.invoke("writer", {"key": "a", "job": job})
    assert cold["status"] == "success", cold
    assert cold["cold"] is True and cold["backend"] == "docker"
    assert cold["result"]["uid"] == 10001
    warm = uploaded.invoke("writer", {"key": "b", "job": job})
    assert warm["cold"] is False and warm["result"] == cold["result"]
    with redis.Redis.from_url(docker_platform.redis_url) as r:
        assert r.get("faasrl:job:dj:a") == b"10001" and r.get("faasrl:job:dj:b") == b"10001"
    [container] = uploaded.cluster()["functions"]["writer"]["containers"]
    assert container["endpoint"].endswith(":8080")


def test_a_killed_container_is_replaced_and_the_invocation_retried(docker_platform, uploaded,
                                                                  docker_client):
    job = {"id": "dk", "redis": acl.grant_new(docker_platform.redis_url, "dk")}
    invocation = uploaded.invoke_async("writer", {"key": "k", "sleep_s": 2, "job": job})
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


def test_a_function_container_reaches_its_jobs_keys_only_and_no_other_runtime(
        docker_platform, tmp_path: Path):
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "fns.py").write_text((TEST_FUNCTIONS / "fns.py").read_text())
    (folder / "manifest.yaml").write_text("name: probe\nhandler: fns:probe\ncpu: 0.25\n"
                                          "memory_mb: 256\n")
    with docker_platform.client() as client:
        client.deploy(folder)
        client.deploy({**{"name": "other", "handler": "fns:echo", "cpu": 0.25,
                          "memory_mb": 256}, "code_sha256": client.upload_code(folder)})
        assert client.invoke("other", {})["status"] == "success"
        [other] = client.cluster()["functions"]["other"]["containers"]
        with redis.Redis.from_url(docker_platform.redis_url) as admin:
            admin.set("faasrl:job:B:secret", "s")
        rec = client.invoke("probe", {"job": {"id": "A", "redis": acl.grant_new(
            docker_platform.redis_url, "A")}, "other_job": "B", "runtime": other["endpoint"],
            "files": ["/var/run/docker.sock"]})
    assert rec["status"] == "success", rec
    out = rec["result"]
    r = out["redis"]
    assert (r["auth"], r["own_set"], r["own_get"]) == ("+OK", "+OK", "1")
    for refused in ("other_get", "other_set", "functions_get", "functions_set", "scan",
                    "flushall"):
        assert r[refused].startswith("-NOPERM"), (refused, r[refused])
    assert r["no_credentials"].startswith("-NOAUTH")
    assert out["runtime_run"] == 401 and out["uid"] == 10001
    assert out["files"] == {"/var/run/docker.sock": "FileNotFoundError"}
    assert "FAASRL_RUNTIME_SECRET" not in out["env"]
