"""A synchronous job's learner lent its actors' cores in Docker containers (uid 10001): the
container's CPU limit allows them and the rows say the learner had them."""

from __future__ import annotations

import docker
import pytest
from helpers import docker_platform, finished, tiny_job

from faasrl.resources import host_cores
from faasrl.round_row import LEARNER_CORES

pytestmark = pytest.mark.docker


def test_a_learner_in_a_container_runs_on_its_idle_actors_cores(
        make_platform, docker_client: docker.DockerClient, runtime_image: str):
    platform, node = docker_platform(make_platform, runtime_image)
    cores = min(3.0, host_cores())  # its own and its two actors', as far as the host has them
    try:
        with platform.client() as client:
            job = client.submit(tiny_job("ppo", rounds=3, lend_actor_cores=True,
                                         controller={"name": "fixed", "actors": 2}))
            done = finished(client, job["id"], timeout_s=600)
            rows = client.job_metrics(job["id"])
            learners = docker_client.containers.list(filters={
                "label": [f"faasrl.node={node}", "faasrl.function=learner"]})
            limits = {c.attrs["HostConfig"]["NanoCpus"] for c in learners}
        assert done["status"] == "succeeded", done
        assert [r[LEARNER_CORES] for r in rows[1:]] == [cores, cores]
        assert limits == {int(host_cores() * 1e9)}  # cpu_max 16, capped at the host's cores
    finally:
        platform.stop()
