"""Env layers on a real engine: installed for the image's Python (not the gateway's), mounted
read-only in every function container, layers installed after a container started included."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path

import docker
import pytest
from helpers import LAYER_MODULE, LAYER_REQUIREMENT, TEST_NETWORK, env_archive, import_from_layer

from faasrl.backends.docker import DockerBackend, DockerConfig
from faasrl.env_layers import LAYERS_ENV, LAYERS_MOUNT
from faasrl.manifest import FunctionSpec

pytestmark = pytest.mark.docker


@pytest.fixture
def layers_dir():
    folder = Path(tempfile.mkdtemp(prefix="faasrl-test-layers-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def backend(docker_client: docker.DockerClient, runtime_image: str, layers_dir: Path):
    node = f"test-{uuid.uuid4().hex[:8]}"
    b = DockerBackend(DockerConfig(node=node, image=runtime_image, network=TEST_NETWORK,
                                   env_layers_dir=layers_dir))
    yield b
    asyncio.run(b.close())
    for c in docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"}):
        c.remove(force=True)


def test_a_container_imports_its_layer_from_a_read_only_mount(backend, docker_client,
                                                               pip_index, tmp_path):
    archive, sha = env_archive(tmp_path / "env", LAYER_REQUIREMENT)
    spec = FunctionSpec(name="layered", handler="fns:layer_import", code_sha256="0" * 64,
                        cpu=0.5, memory_mb=512)

    async def scenario():
        store = await backend.layer_store()
        handle = await backend.start(spec, "c1")  # before the layer exists
        assert await store.ensure(archive, sha) == store.root / sha
        return store, handle, await import_from_layer(handle, sha, upload=True)

    store, handle, out = asyncio.run(scenario())
    # The image's Python (Debian's), asked of the image: pip installed for it from here.
    probe = docker_client.containers.run(
        backend.config.image, ["python", "-c", "import platform; print(platform."
                               "python_version())"], remove=True, network_mode="none")
    assert store.target.version == probe.decode().strip() and store.target.python is None
    [known] = (backend.config.env_layers_dir / ".targets").iterdir()  # asked once per image
    assert known.stem == docker_client.images.get(backend.config.image).id.split(":")[-1]
    assert out["answer"] == 42 and out["uid"] == 10001
    assert out["file"] == f"{LAYERS_MOUNT}/{store.target.key}/{sha}/{LAYER_MODULE}.py"
    assert out["write"] in {"OSError", "PermissionError"}  # a read-only file system
    attrs = docker_client.containers.get(handle.native_id).attrs
    [mount] = attrs["Mounts"]
    assert mount["Destination"] == LAYERS_MOUNT and mount["RW"] is False
    assert mount["Source"] == str(backend.config.env_layers_dir)
    assert f"{LAYERS_ENV}={LAYERS_MOUNT}/{store.target.key}" in attrs["Config"]["Env"]
    assert not (store.root / sha / "written.txt").exists()
