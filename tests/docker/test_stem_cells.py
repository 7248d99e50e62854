"""Stem cells on a real engine: a generic container, pre-imported, specialised for one function
(its limits as the engine shows them, its environment, its folder and handler) and never for a
second; the pool refills them; records say which cold starts were stem cells; and a start
falls back to a new container when no stem cell is free or one cannot be used."""

from __future__ import annotations

import asyncio
import base64
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest
from helpers import REPO, TEST_FUNCTIONS, TEST_NETWORK, wait_for

from faasrl.backends.docker import DockerBackend, DockerConfig
from faasrl.code_archive import pack
from faasrl.invoker.runtime_client import RuntimeClient
from faasrl.manifest import FunctionSpec
from faasrl.runtime.server import SECRET_ENV

pytestmark = pytest.mark.docker

GATEWAY_SECRET = "FAASRL_TOKEN"  # what the gateway is started with; no function may see it
MB = 1024 * 1024


@pytest.fixture
def node() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def backend(docker_client: docker.DockerClient, runtime_image: str, node: str, monkeypatch):
    monkeypatch.setenv(GATEWAY_SECRET, "the-gateway's-token")
    b = DockerBackend(DockerConfig(node=node, image=runtime_image, network=TEST_NETWORK,
                                   functions_dir=REPO / "functions"))
    yield b
    asyncio.run(b.close())
    assert docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"}) \
        == []


async def ready_stem(backend: DockerBackend, sid: str):
    """A stem cell whose runtime has done its imports, and its /healthz answer."""
    handle = await backend.start_stem("", sid, 1024)
    client = RuntimeClient(handle.host, handle.port, handle.secret)
    for _ in range(1200):  # its imports take seconds on a loaded machine
        try:
            status, health = await client.request("GET", "/healthz")
            if status == 200:
                return handle, client, health
        except ConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the stem cell never answered")


async def initialise(handle, client: RuntimeClient, spec: FunctionSpec, **init) -> dict:
    """/init as the invoker sends it: the backend's part (cwd, env) under the function's."""
    body = {"handler": spec.handler, "function": spec.name, "memory_mb": spec.memory_mb,
            "env": {**handle.init.get("env", {}), **spec.env}, **init}
    if "cwd" in handle.init:
        body["cwd"] = handle.init["cwd"]
    status, out = await client.request("POST", "/init", body)
    assert status == 200, out
    return out


def env_of(docker_client: docker.DockerClient, native_id: str) -> dict[str, str]:
    entries = docker_client.containers.get(native_id).attrs["Config"]["Env"]
    return dict(e.split("=", 1) for e in entries)


def test_a_stem_cell_is_specialised_with_limits_env_and_handler(backend, docker_client):
    spec = FunctionSpec(name="dump", handler="fns:numeric_env", code_sha256="0" * 64, cpu=2,
                        memory_mb=768, env={"MINE": "yes"})
    names = ["MINE", "FAASRL_CONTAINER_ID", "OMP_NUM_THREADS", GATEWAY_SECRET, SECRET_ENV]

    async def scenario():
        stem, client, health = await ready_stem(backend, "s1")
        before = env_of(docker_client, stem.native_id)
        handle = await backend.start(spec, stem.id, stem=stem)  # as the pool: one id
        code = base64.b64encode(pack(TEST_FUNCTIONS)).decode()
        await initialise(handle, client, spec, code=code)
        _, out = await client.request("POST", "/run", {"args": names})
        client.close()
        return stem, handle, health, before, out["result"]

    stem, handle, health, before, out = asyncio.run(scenario())
    assert health["stem_cell"] is True and 100 < health["memory_mb"] < 1024  # torch imported
    assert handle.stem_cell and handle.native_id == stem.native_id
    # Before: nothing of any function's, nothing of the gateway's; its secret only in its own
    # environment, which the runtime empties of it before a handler loads.
    assert GATEWAY_SECRET not in before and "MINE" not in before
    assert before["OMP_NUM_THREADS"] == "1" and "FAASRL_CONTAINER_ID" not in before
    assert out["env"] == {"MINE": "yes", "FAASRL_CONTAINER_ID": "s1", "OMP_NUM_THREADS": "2",
                          GATEWAY_SECRET: None, SECRET_ENV: None}
    assert out["torch_preloaded"] is True and out["torch_threads"] == 2  # resized at /init
    attrs = docker_client.containers.get(handle.native_id).attrs
    host = attrs["HostConfig"]
    assert (host["CpuQuota"], host["CpuPeriod"], host["CpuShares"]) == (200_000, 100_000, 1024)
    assert host["Memory"] == host["MemorySwap"] == 768 * MB
    assert attrs["Name"] == "/faasrl-dump-s1"
    assert attrs["Config"]["Labels"]["faasrl.container"] == "s1"
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"] and not attrs["Mounts"]
    assert attrs["Config"]["Labels"]["faasrl.stem_cell"] == "true"


def test_a_built_in_function_gets_its_folder_and_thread_count(backend):
    spec = FunctionSpec(name="echo", handler="handler:main",
                        code_dir=str(REPO / "functions/echo"), cpu=2, memory_mb=512)

    async def scenario():
        stem, client, _ = await ready_stem(backend, "s2")
        handle = await backend.start(spec, "c2", stem=stem)
        await initialise(handle, client, spec)
        _, out = await client.request("POST", "/run", {"args": {"x": 1}})
        client.close()
        return handle, out

    handle, out = asyncio.run(scenario())
    assert handle.init["cwd"] == "/opt/faasrl/functions/echo"
    assert out["result"]["echo"] == {"x": 1}


def test_an_unusable_stem_cell_falls_back_to_a_new_container(backend, docker_client):
    spec = FunctionSpec(name="echo", handler="handler:main",
                        code_dir=str(REPO / "functions/echo"), cpu=0.5, memory_mb=512)

    async def scenario():
        stem, client, _ = await ready_stem(backend, "s3")
        client.close()
        docker_client.containers.get(stem.native_id).kill()
        for _ in range(200):  # the backend learns of the exit from the event stream
            if backend.exit_code(stem) is not None:
                break
            await asyncio.sleep(0.05)
        return stem, await backend.start(spec, "c3", stem=stem)

    stem, handle = asyncio.run(scenario())
    assert not handle.stem_cell and handle.native_id != stem.native_id
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(stem.native_id)
    assert docker_client.containers.get(handle.native_id).attrs["HostConfig"]["NanoCpus"] \
        == 500_000_000


# ------------------------------------------------------------------------ on a platform
@pytest.fixture
def stem_platform(make_platform, docker_client: docker.DockerClient, runtime_image: str):
    node = f"test-{uuid.uuid4().hex[:8]}"
    platform = make_platform(backend="docker", redis_url=None, node_name=node,
                             docker_network=TEST_NETWORK, docker_image=runtime_image,
                             stem_cells=1)
    yield platform, node
    platform.stop()
    assert docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"}) \
        == []


def ready_stems(client) -> int:
    return client.cluster()["stem_cells"].get("", {}).get("ready", 0)


def deploy(client, name: str, handler: str, memory_mb: int = 512) -> None:
    client.deploy({"name": name, "handler": handler, "code_sha256": client.upload_code(
        TEST_FUNCTIONS), "cpu": 0.1, "memory_mb": memory_mb})


def native_id(docker_client: docker.DockerClient, function: str, container: str) -> str:
    return docker_client.containers.get(f"faasrl-{function}-{container}").id


def test_platform_takes_refills_and_never_reuses_stem_cells(stem_platform, docker_client):
    platform, node = stem_platform
    with platform.client() as client:
        deploy(client, "a", "fns:env")
        deploy(client, "b", "fns:env")
        wait_for(lambda: ready_stems(client), 120, "a ready stem cell")
        cells = {c.id for c in docker_client.containers.list(
            filters={"label": [f"faasrl.node={node}", "faasrl.stem_cell=true"]})}
        a = client.invoke("a", ["FAASRL_CONTAINER_ID"])
        assert a["status"] == "success" and a["cold"] and a["stem_cell"], a
        assert a["result"]["FAASRL_CONTAINER_ID"] == a["container"]
        a_native = native_id(docker_client, "a", a["container"])
        assert a_native in cells  # a's container is the cell, renamed

        wait_for(lambda: ready_stems(client), 120, "the refill")
        b = client.invoke("b", ["FAASRL_CONTAINER_ID"])
        assert b["status"] == "success" and b["cold"] and b["stem_cell"], b
        assert native_id(docker_client, "b", b["container"]) != a_native  # a new cell

        warm = client.invoke("a", ["FAASRL_CONTAINER_ID"])
        assert warm["container"] == a["container"] and not warm["cold"]
        assert not warm["stem_cell"]  # said of the cold start only
        assert client.invocation(a["id"])["stem_cell"] is True  # the stored record says so
        client.delete("a")  # its container is removed, not made a stem cell again
        wait_for(lambda: not client.cluster()["functions"].get("a"), 30, "a's container gone")
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(a_native)


def test_platform_falls_back_when_no_stem_cell_is_free(stem_platform):
    platform, _ = stem_platform
    with platform.client() as client:
        for name in ("x", "y"):
            deploy(client, name, "fns:echo")
        deploy(client, "small", "fns:echo", memory_mb=256)
        wait_for(lambda: ready_stems(client), 120, "a ready stem cell")
        small = client.invoke("small", {})  # too little memory to become a stem cell
        assert small["status"] == "success" and small["cold"] and not small["stem_cell"]

        def cold(name: str) -> dict:
            with platform.client() as own:
                return own.invoke(name, {})

        with ThreadPoolExecutor(2) as threads:  # two cold starts, one cell
            x, y = threads.map(cold, ["x", "y"])
    assert x["status"] == y["status"] == "success" and x["cold"] and y["cold"]
    assert sorted([x["stem_cell"], y["stem_cell"]]) == [False, True]
