"""The example custom env's job (examples/custom-env) on the Docker backend: the archive
uploaded, described by the actor in its container at submit, and trained on by function
containers that read it from the job's Redis keys."""

from __future__ import annotations

import docker
import numpy as np
import pytest
from helpers import REPO, docker_platform, finished

from faasrl.user_input import load_yaml

pytestmark = pytest.mark.docker
EXAMPLE = REPO / "examples" / "custom-env"


def test_the_example_corridor_learns_in_docker_containers(
        make_platform, docker_client: docker.DockerClient, runtime_image: str):
    platform, node = docker_platform(make_platform, runtime_image)
    try:
        with platform.client() as client:
            job = client.submit(load_yaml((EXAMPLE / "corridor.yaml").read_text()),
                                base=EXAMPLE)
            assert job["env_description"]["action_kind"] == "discrete"
            done = finished(client, job["id"], timeout_s=600)
        assert done["status"] == "succeeded", done
        assert done["stop_reason"].startswith("target reward reached"), done
        assert done["evaluation"]["mean"] >= 0.9, done["evaluation"]
        # Its policy served from a container (uid 10001), needing nothing of the env's code.
        with platform.client() as client:
            served = client.serve_job(job["id"])
            obs = np.zeros(done["env_description"]["obs_shape"], np.float32)
            out = client.invoke(served["function"], {"obs": [obs.tolist()] * 3})
        assert out["status"] == "success", out
        assert out["result"]["version"] == done["version"] and len(out["result"]["actions"]) == 3
    finally:
        platform.stop()
    left = docker_client.containers.list(all=True, filters={"label": f"faasrl.node={node}"})
    assert left == []  # the gateway stopped every container it started
