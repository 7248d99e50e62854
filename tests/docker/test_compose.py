"""The compose cluster as users run it: images, `docker-compose.yml`, REST. A CartPole job, a
function container killed mid-round, and a gateway restart, each on the real cluster."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from helpers import REPO, assert_rows_whole, stall, succeeded, wait_for

from faasrl.client import Client, GatewayError
from faasrl.env_layers import LAYERS_MOUNT
from faasrl.redis_server import free_port

pytestmark = pytest.mark.docker

CLASSIC_STEPS = 4 * 128  # envs times steps per actor and round for classic control (the defaults)


def _compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("neither 'docker compose' nor 'docker-compose' is installed "
                "(make docker-engine installs docker-compose)")


class Cluster:
    def __init__(self, project: str, env: dict[str, str], url: str, token: str,
                 docker_client: docker.DockerClient):
        self.project, self.env, self.url, self.token = project, env, url, token
        self.docker = docker_client
        self.compose = [*_compose_command(), "-p", project, "-f", str(REPO / "docker-compose.yml")]

    def run(self, *args: str) -> str:
        return subprocess.run([*self.compose, *args], env=self.env, check=True,
                              capture_output=True, text=True).stdout

    def containers(self, service: str) -> list:
        return self.docker.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={self.project}", f"com.docker.compose.service={service}"]})

    def client(self) -> Client:
        return Client(self.url, self.token, timeout=60)

    def wait_healthy(self) -> None:
        def healthy() -> bool:
            try:
                with self.client() as c:
                    return c.health()["status"] == "ok"
            except GatewayError:
                return False
        wait_for(healthy, 120, "the gateway to answer /healthz")

    def gateway(self):
        [container] = self.containers("gateway")
        return container

    def functions(self, function: str | None = None, **labels: str) -> list:
        """The node's running containers with these ``faasrl.*`` labels; ``function``: only
        its, found by name (one made of a stem cell has no ``faasrl.function`` label)."""
        wanted = [f"faasrl.node={self.project}", *(f"faasrl.{k}={v}" for k, v in labels.items())]
        return [c for c in self.docker.containers.list(filters={"label": wanted})
                if function is None or c.name.rsplit("-", 1)[0] == f"faasrl-{function}"]


@pytest.fixture(scope="module")
def cluster(docker_client: docker.DockerClient, platform_image: str, runtime_image: str
            ) -> Iterator[Cluster]:
    project = f"faasrl-test-{secrets.token_hex(3)}"
    port = free_port()
    # As users run it: no token given, the gateway makes one.
    env = {**{k: v for k, v in os.environ.items() if k != "FAASRL_TOKEN"},
           "FAASRL_PUBLISH": f"127.0.0.1:{port}", "FAASRL_NETWORK": project,
           "FAASRL_NODE_NAME": project}
    c = Cluster(project, env, f"http://127.0.0.1:{port}", "", docker_client)
    c.run("up", "-d")
    try:
        c.wait_healthy()
        c.token = c.run("exec", "-T", "gateway", "faasrl", "token").strip()
        yield c
    finally:
        logs = subprocess.run([*c.compose, "logs", "--tail", "40", "gateway"], env=env,
                              capture_output=True, text=True).stdout
        c.run("down", "-v")
        for leftover in c.functions():
            leftover.remove(force=True)
        print(logs)


def job(max_rounds: int, **extra) -> dict:
    return {"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 2},
            "stop": {"max_rounds": max_rounds}, "evaluation_episodes": 0, **extra}


def test_cartpole_job_over_rest(cluster: Cluster):
    with cluster.client() as client:
        rec = succeeded(client, client.submit(job(3))["id"], timeout_s=240)
        rows = client.job_metrics(rec["id"])
        assert [r["round"] for r in rows] == [0, 1, 2]
        assert all(r["env_steps"] == 2 * CLASSIC_STEPS == r["samples"] for r in rows)
        assert rec["env_steps"] == 3 * 2 * CLASSIC_STEPS
        assert rows[-1]["cost_total"] > 0 and rows[-1]["serverful_cost_total"] > 0
        records = client.invocations("actor", limit=6)
        assert {r["backend"] for r in records} == {"docker"}
    assert len(cluster.functions(function="actor")) == 2  # warm, kept alive


def test_the_token_is_the_gateways_own_and_kept_private(cluster: Cluster):
    assert len(cluster.token) >= 32
    with Client(cluster.url, "wrong", timeout=30) as client, pytest.raises(GatewayError) as e:
        client.functions()
    assert e.value.status == 401
    mode = cluster.run("exec", "-T", "gateway", "stat", "-c", "%a", "/var/lib/faasrl/token")
    assert mode.strip() == "600"


def test_redis_wants_a_password_that_function_containers_never_get(cluster: Cluster):
    [redis] = cluster.containers("redis")
    code, out = redis.exec_run(["redis-cli", "ping"], demux=True)
    assert b"NOAUTH" in out[0]
    code, out = redis.exec_run(["cat", "/run/faasrl-redis/password"])
    password = out.decode().strip()
    assert code == 0 and len(password) >= 32
    assert password not in " ".join(cluster.gateway().attrs["Config"]["Env"])
    with cluster.client() as client:
        assert client.invoke("echo", {"x": 1})["status"] == "success"
    functions = cluster.functions()
    assert functions
    for container in functions:
        config = container.attrs["Config"]
        seen = " ".join([*config["Env"], *(config["Cmd"] or []), *config["Labels"].values()])
        assert password not in seen, container.name
        assert not [m for m in container.attrs["Mounts"]
                    if m.get("Name", "").endswith("_redis-password")]


def test_function_containers_mount_the_clusters_env_layers_read_only(cluster: Cluster):
    """The gateway keeps env layers on a volume of their own, which it finds among its mounts
    and gives every function container read-only (a path of its own would mean nothing to the
    engine)."""
    volume = f"{cluster.project}_env-layers"
    [own] = [m for m in cluster.gateway().attrs["Mounts"]
             if m["Destination"] == "/var/lib/faasrl/env-layers"]
    assert own["Type"] == "volume" and own["Name"] == volume and own["RW"] is True
    with cluster.client() as client:
        assert client.invoke("echo", {"x": 1})["status"] == "success"
    functions = cluster.functions()
    assert functions
    for container in functions:
        [layers] = [m for m in container.attrs["Mounts"] if m["Destination"] == LAYERS_MOUNT]
        assert layers["Type"] == "volume" and layers["Name"] == volume
        assert layers["RW"] is False, container.name


def test_up_again_recreates_nothing_and_no_volume_is_anonymous(cluster: Cluster):
    def state() -> dict[str, tuple[str, str]]:
        return {s: (c.id, c.attrs["State"]["StartedAt"])
                for s in ("redis", "gateway") for c in cluster.containers(s)}
    before = state()
    cluster.run("up", "-d")
    assert state() == before
    for service in ("redis", "gateway", "runtime"):
        for container in cluster.containers(service):
            volumes = [m for m in container.attrs["Mounts"] if m["Type"] == "volume"]
            assert all(m["Name"].startswith(f"{cluster.project}_") for m in volumes), volumes


@pytest.mark.parametrize("function", ["actor", "learner"])
def test_a_function_container_killed_mid_round(cluster: Cluster, function: str):
    with cluster.client() as client:
        job_id = client.submit(job(8, steps_per_actor=1024))["id"]

        def busy():
            pools = client.cluster()["functions"]
            return [c for c in pools.get(function, {}).get("containers", [])
                    if c["state"] == "busy"]
        wait_for(lambda: client.job(job_id)["round"] >= 2, 120, "two rounds")
        victim = wait_for(busy, 120, f"a {function} mid-round")[0]
        killed_at = time.time()
        for container in cluster.functions(container=victim["id"]):
            container.kill()
        rec = succeeded(client, job_id, timeout_s=240)
        rows = client.job_metrics(job_id)
        # Every round exactly once, each with both actors' steps trained on exactly once.
        assert_rows_whole(rows, 8, 2 * 4 * 1024)
        assert all(r["samples"] == r["env_steps"] and r["actor_failures"] == 0 for r in rows)
        assert rec["env_steps"] == 8 * 2 * 4 * 1024
        # The victim was replaced: its invocation retried on a new container, or (a learner's
        # run is short: the kill can land just after it answered) the next one started one.
        after = [r for r in client.invocations(function, limit=50)
                 if r["requested_at"] >= killed_at - 2]
        assert any(r["attempts"] == 2 or r["cold"] for r in after), after
        assert all(r["status"] == "success" for r in after)
        print(f"\nfault disruption: docker kill of the {function}: job stalled "
              f"{stall(rows):.2f} s")


def test_a_redis_restart_during_the_actors_phase(cluster: Cluster):
    """``docker restart`` of the compose Redis while actors write: the actors' Redis calls ride
    it out (the name resolves again, their job's user is granted again), no slot is lost and no
    round trains on part of its batch."""
    with cluster.client() as client:
        job_id = client.submit(job(8, steps_per_actor=1024))["id"]
        wait_for(lambda: client.job(job_id)["round"] >= 2, 120, "two rounds")
        wait_for(lambda: [c for c in client.cluster()["functions"]["actor"]["containers"]
                          if c["state"] == "busy"], 120, "actors mid-round")
        [redis] = cluster.containers("redis")
        redis.restart(timeout=10)
        rec = succeeded(client, job_id, timeout_s=240)
        rows = client.job_metrics(job_id)
        assert_rows_whole(rows, 8, 2 * 4 * 1024)
        assert all(r["samples"] == r["env_steps"] for r in rows), rows
        assert rec["env_steps"] == 8 * 2 * 4 * 1024
        print(f"\nfault disruption: docker restart of the compose Redis: job stalled "
              f"{stall(rows):.2f} s")


def test_registrations_and_a_job_survive_a_gateway_restart(cluster: Cluster, tmp_path: Path):
    folder = tmp_path / "hello"
    folder.mkdir()
    (folder / "manifest.yaml").write_text("name: hello\nhandler: handler:main\ncpu: 0.1\n"
                                          "memory_mb: 128\n")
    (folder / "handler.py").write_text("def main(args, context):\n    return 'hi ' + args\n")
    with cluster.client() as client:
        client.deploy(folder)
        assert client.invoke("hello", "there")["result"] == "hi there"
        job_id = client.submit(job(40))["id"]
        wait_for(lambda: client.job(job_id)["round"] >= 3, 120, "three rounds")
    old = {c.id for c in cluster.functions()}
    cluster.gateway().restart(timeout=30)
    cluster.wait_healthy()
    with cluster.client() as client:
        assert {"actor", "learner", "echo", "hello"} <= {f["name"] for f in client.functions()}
        assert client.invoke("hello", "again")["result"] == "hi again"
        rec = succeeded(client, job_id, timeout_s=240)
        assert rec["round"] == 40
        rounds = [r["round"] for r in client.job_metrics(job_id)]
        assert len(rounds) == len(set(rounds)) and rounds[-1] == 39
    # The containers of the gateway's first life are gone (stopped, or reaped at its restart).
    time.sleep(0.5)
    assert not old & {c.id for c in cluster.functions()}
