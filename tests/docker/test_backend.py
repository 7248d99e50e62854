"""The Docker backend against a real engine: limits and isolation, exits, reaping."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from helpers import REPO, TEST_NETWORK

from faasrl.backends.docker import DockerBackend, DockerConfig
from faasrl.invoker.runtime_client import RuntimeClient
from faasrl.manifest import FunctionSpec

pytestmark = pytest.mark.docker


@pytest.fixture
def node() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def backend(docker_client: docker.DockerClient, runtime_image: str, node: str):
    config = DockerConfig(node=node, image=runtime_image, network=TEST_NETWORK,
                          functions_dir=REPO / "functions")
    b = DockerBackend(config)
    yield b
    asyncio.run(b.close())
    for c in docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"}):
        c.remove(force=True)


def echo_spec(**kw) -> FunctionSpec:
    return FunctionSpec(name="echo", handler="handler:main", code_dir=str(REPO / "functions/echo"),
                        cpu=0.5, memory_mb=256, **kw)


async def _start_and_init(backend: DockerBackend, spec: FunctionSpec, cid: str):
    handle = await backend.start(spec, cid)
    client = RuntimeClient(handle.host, handle.port, handle.secret)
    for _ in range(600):
        try:
            if (await client.request("GET", "/healthz"))[0] == 200:
                break
        except ConnectionError:
            await asyncio.sleep(0.05)
    status, out = await client.request("POST", "/init", {"handler": spec.handler,
                                                         "function": spec.name})
    assert status == 200, out
    return handle, client


def test_container_is_limited_and_isolated(backend, docker_client):
    async def scenario():
        handle, client = await _start_and_init(backend, echo_spec(), "c1")
        status, out = await client.request("POST", "/run", {"args": {"x": 1}})
        client.close()
        return handle, status, out

    handle, status, out = asyncio.run(scenario())
    assert status == 200 and out["result"]["echo"] == {"x": 1}
    attrs = docker_client.containers.get(handle.native_id).attrs
    host, config = attrs["HostConfig"], attrs["Config"]
    assert host["NanoCpus"] == 500_000_000
    assert host["Memory"] == host["MemorySwap"] == 256 * 1024 * 1024
    assert host["PidsLimit"] == 1024
    assert host["ReadonlyRootfs"] is True
    assert "/tmp" in host["Tmpfs"]
    assert host["CapDrop"] == ["ALL"]
    assert config["User"] == "10001:10001"
    assert config["WorkingDir"] == "/opt/faasrl/functions/echo"
    assert not attrs["Mounts"]  # above all, no Docker socket
    assert config["Labels"]["faasrl.node"] == backend.config.node
    assert config["Labels"]["faasrl.function"] == "echo"
    assert "NVIDIA_VISIBLE_DEVICES=void" in config["Env"]
    # demux: stdout and stderr come back apart, since their interleaving is not ordered.
    top = docker_client.containers.get(handle.native_id).exec_run(
        ["python", "-c", "import os; open('/tmp/x', 'w'); print(os.getuid(), flush=True);"
                         "open('/opt/faasrl/x', 'w')"], demux=True)
    stdout, stderr = top.output
    assert top.exit_code == 1 and stdout.decode().strip() == "10001"
    assert "Read-only file system" in stderr.decode()


def test_exit_is_seen_and_stop_removes(backend, docker_client):
    async def scenario():
        handle, client = await _start_and_init(backend, echo_spec(), "c2")
        client.close()
        assert backend.exit_code(handle) is None
        docker_client.containers.get(handle.native_id).kill()
        for _ in range(200):
            if backend.exit_code(handle) is not None:
                break
            await asyncio.sleep(0.05)
        code = backend.exit_code(handle)
        await backend.stop(handle)
        return handle, code

    handle, code = asyncio.run(scenario())
    assert code == 137
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(handle.native_id)
    assert backend.list_own() == []


def test_reaps_only_its_nodes_orphans(backend, docker_client, runtime_image, node):
    def sleeper(labels: dict[str, str]) -> str:
        return docker_client.containers.run(runtime_image, ["sleep", "300"], labels=labels,
                                            detach=True, network_mode="none").id

    orphan = sleeper({"faasrl.node": node, "faasrl.owner": "1:1"})  # its owner is gone
    others = [sleeper({"faasrl.node": f"{node}-other", "faasrl.owner": "1:1"}),
              sleeper({"unrelated": "yes"})]
    try:
        live = asyncio.run(backend.start(echo_spec(), "c3"))  # owned by this process
        assert backend.reap_orphans() == 1
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(orphan)
        for cid in [*others, live.native_id]:
            assert docker_client.containers.get(cid).status == "running"
    finally:
        for cid in others:
            docker_client.containers.get(cid).remove(force=True)


def test_check_names_the_fields(backend, tmp_path: Path):
    assert backend.check(echo_spec()) == {}
    fields = backend.check(FunctionSpec(name="f", handler="m:f", code_dir=str(tmp_path),
                                        image="faasrl/none:missing"))
    assert set(fields) == {"image"}
    fields = backend.check(FunctionSpec(name="f", handler="m:f", code_dir=str(tmp_path)))
    assert set(fields) == {"code_dir"}
    assert backend.check(FunctionSpec(name="f", handler="m:f", code_sha256="0" * 64)) == {}


def test_exit_code_of_a_stopped_container(backend):
    handle = asyncio.run(backend.start(echo_spec(), "c4"))
    asyncio.run(backend.stop(handle, 0))
    assert backend.exit_code(handle) == -1
    assert backend.list_own() == []


def test_starts_racing_to_make_the_network_make_one(docker_client, runtime_image: str,
                                                     node: str):
    """Concurrent first starts each find no network and create it: the engine must refuse all
    but one (a second network of the name made every later start fail as "ambiguous")."""
    name = f"{TEST_NETWORK}-race-{node}"
    backends = [DockerBackend(DockerConfig(node=node, image=runtime_image, network=name,
                                           functions_dir=REPO / "functions"))
                for _ in range(8)]
    try:
        with ThreadPoolExecutor(len(backends)) as pool:
            list(pool.map(lambda b: b._ensure_network(), backends))
        assert len(docker_client.networks.list(names=[name])) == 1
    finally:
        for b in backends:
            asyncio.run(b.close())
        for network in docker_client.networks.list(names=[name]):
            network.remove()
