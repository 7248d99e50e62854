"""GPUs through the Docker backend: runs where NVML finds a GPU and faasrl/runtime-gpu is built
(`make image-runtime-gpu`); skipped, saying which is missing, elsewhere."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest
from helpers import TEST_NETWORK

from faasrl.resources import discover_gpus

pytestmark = pytest.mark.docker

HANDLER = '''
import os, torch

def main(args, context):
    return {"cuda": torch.cuda.is_available(), "devices": torch.cuda.device_count(),
            "visible": os.environ.get("NVIDIA_VISIBLE_DEVICES")}
'''


@pytest.fixture
def gpu_image(docker_client) -> str:
    if not discover_gpus():
        pytest.skip("no GPU found by NVML on this machine")
    try:
        docker_client.images.get("faasrl/runtime-gpu:latest")
    except docker.errors.ImageNotFound:
        pytest.skip("image faasrl/runtime-gpu:latest is not built; run 'make image-runtime-gpu'")
    return "faasrl/runtime-gpu:latest"


def test_a_function_given_a_gpu_sees_exactly_it(make_platform, gpu_image, tmp_path: Path):
    platform = make_platform(backend="docker", redis_url=None, docker_network=TEST_NETWORK,
                             node_name=f"test-{uuid.uuid4().hex[:8]}", docker_gpu_image=gpu_image)
    folder = tmp_path / "gpu"
    folder.mkdir()
    (folder / "handler.py").write_text(HANDLER)
    with platform.client() as client:
        sha = client.upload_code(folder)
        client.deploy({"name": "gpu", "handler": "handler:main", "code_sha256": sha, "gpu": 1,
                       "cpu": 1, "memory_mb": 4096})
        client.deploy({"name": "cpu", "handler": "handler:main", "code_sha256": sha,
                       "cpu": 1, "memory_mb": 4096, "image": gpu_image})
        on_gpu = client.invoke("gpu")
        on_cpu = client.invoke("cpu")
    assert on_gpu["status"] == "success", on_gpu
    assert on_gpu["result"]["cuda"] and on_gpu["result"]["devices"] == 1
    assert on_cpu["result"] == {"cuda": False, "devices": 0, "visible": "void"}
