"""Env layers on the gateway's own local Ray cluster: a function container (a Ray actor's
runtime, on this machine) imports its layer from the gateway's folder."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from helpers import LAYER_MODULE, LAYER_REQUIREMENT, RAY_ENV, env_archive, import_from_layer

from faasrl.manifest import FunctionSpec

pytest.importorskip("ray", reason="the Ray backend needs the ray package (make install)")
from faasrl.backends.ray import RayBackend, RayConfig

pytestmark = pytest.mark.ray


def test_a_local_clusters_function_imports_its_layer(pip_index, tmp_path, monkeypatch):
    for key, value in RAY_ENV.items():
        monkeypatch.setenv(key, value)
    archive, sha = env_archive(tmp_path / "env", LAYER_REQUIREMENT)
    spec = FunctionSpec(name="layered", handler="fns:layer_import", code_sha256="0" * 64,
                        cpu=0.5, memory_mb=512)

    async def scenario() -> dict:
        backend = RayBackend(RayConfig(node=f"test-{uuid.uuid4().hex[:8]}", local_cpu=1,
                                       log_dir=tmp_path / "logs",
                                       env_layers_dir=tmp_path / "layers"))
        try:
            store = await backend.layer_store()
            assert await store.ensure(archive, sha) == store.root / sha
            handle = await backend.start(spec, "c1")
            out = await import_from_layer(handle, sha, upload=True)  # nodes get uploaded code
            return {**out, "root": str(store.root)}
        finally:
            await backend.close()

    out = asyncio.run(scenario())
    assert out["answer"] == 42
    assert out["file"] == f"{out['root']}/{sha}/{LAYER_MODULE}.py"
