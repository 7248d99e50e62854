"""The Ray backend on a real multi-node Ray cluster on this machine (``ray.cluster_utils``): a
head that runs nothing and one-core worker nodes, started once for the module.

A PPO job's containers spread over the nodes; a node removed mid-job loses nothing; a function
no node can hold is refused naming the field, at deploy and at a job's submit; a restarted
gateway reaps its node's actors whose owner is gone and leaves other nodes' alone; containers
fork from their node's zygote with no actor of their own (a placement group holds their memory),
start as new interpreters when it is gone, and one asked to PACK has an actor of its own; a
killed zygote actor is placed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import (
    RAY_ENV,
    REPO,
    assert_rows_whole,
    at_round,
    cmdline,
    every_invocation_recorded,
    fn,
    gateway,
    gateway_up,
    parent,
    pid_alive,
    ray_tmp_dir,
    succeeded,
    wait_for,
)

from faasrl.backends.process import ZYGOTE_HEAP_MB
from faasrl.backends.ray_zygote import ZYGOTE_PREFIX
from faasrl.client import Client, GatewayError
from faasrl.embedded import EmbeddedPlatform
from faasrl.manifest import load_manifest
from faasrl.redis_server import free_port

ray = pytest.importorskip("ray", reason="the Ray backend needs the ray package (make install)")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.ray

OBJECT_STORE = 80 * 2**20  # Ray's minimum is 75 MB; faasrl moves no data through it
WORKER = {"num_cpus": 1, "memory": 5 * 2**30, "object_store_memory": OBJECT_STORE}
ROUNDS = 6
SYNC = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 128,
        "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
        "stop": {"max_rounds": ROUNDS}}
SYNC_STEPS = 2 * 2 * 128


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head with no cores and three one-core worker nodes."""
    with pytest.MonkeyPatch.context() as env, ray_tmp_dir() as tmp:
        for key, value in {**RAY_ENV, "RAY_TMPDIR": str(tmp)}.items():
            env.setenv(key, value)
        made = cluster_utils.Cluster(
            initialize_head=True, connect=False,
            head_node_args={"num_cpus": 0, "include_dashboard": False,
                            "object_store_memory": OBJECT_STORE})
        try:
            for _ in range(3):
                made.add_node(**WORKER)
            made.wait_for_nodes(timeout=120)
            yield made
        finally:
            made.shutdown()


@pytest.fixture
def on_ray(make_platform: Any, cluster: Any) -> Iterator[EmbeddedPlatform]:
    yield make_platform(backend="ray", ray_address=cluster.address, register_builtins=True,
                        node_name="ray-test")


def alive_cores(client: Client) -> float:
    return client.cluster()["capacity"]["cpu"]


def test_a_ppo_job_spreads_its_containers_over_the_nodes(on_ray: EmbeddedPlatform):
    with on_ray.client() as client:
        assert client.cluster()["backend"] == "ray"
        assert alive_cores(client) == 3  # the cluster's, not this host's
        job = client.submit(SYNC)
        succeeded(client, job["id"], timeout_s=240)
        assert_rows_whole(client.job_metrics(job["id"]), ROUNDS, SYNC_STEPS)
        records = client.invocations(limit=1000)
    nodes = {r["node"] for r in records if r["function"] in ("actor", "learner")}
    assert None not in nodes
    assert len(nodes) == 3, nodes  # one core per node: actor, actor, learner on three nodes
    actor_nodes = {r["node"] for r in records if r["function"] == "actor"}
    assert len(actor_nodes) == 2, actor_nodes


def test_a_node_removed_mid_round_loses_nothing(on_ray: EmbeddedPlatform, cluster: Any):
    spare = cluster.add_node(**WORKER)
    with on_ray.client() as client:
        wait_for(lambda: alive_cores(client) == 4, timeout_s=30, what="the new node's core")
        job = client.submit(SYNC)
        at_round(client, job["id"], 2)

        def busy_actor_node() -> str | None:
            pool = client.cluster()["functions"].get("actor", {"containers": []})
            return next((c["node"] for c in pool["containers"] if c["state"] == "busy"), None)

        doomed = wait_for(busy_actor_node, timeout_s=60, what="a busy actor", poll_s=0.005)
        node = next(n for n in [spare, *cluster.worker_nodes] if n.node_id == doomed)
        cluster.remove_node(node, allow_graceful=False)
        wait_for(lambda: alive_cores(client) == 3, timeout_s=30, what="the node to be gone")
        succeeded(client, job["id"], timeout_s=240)
        rows = client.job_metrics(job["id"])
        assert_rows_whole(rows, ROUNDS, SYNC_STEPS)
        every_invocation_recorded(client, "actor", 2 * ROUNDS)
        assert doomed not in {c["node"] for pool in client.cluster()["functions"].values()
                              for c in pool["containers"]}


def test_actors_on_lambda_and_the_learner_on_ray_in_one_job(make_platform, cluster: Any,
                                                            monkeypatch: pytest.MonkeyPatch):
    """Hybrid placement: the actor's Lambda twin is this gateway's own Lambda API (as in
    tests/integration/test_lambda_backend.py), so actors go gateway → boto3 → Lambda API → a
    Ray container, and the learner runs on Ray directly."""
    token = "ray-lambda-token"
    for key, value in {"AWS_ACCESS_KEY_ID": "faasrl", "AWS_SECRET_ACCESS_KEY": token,
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    platform = make_platform(backend="ray", ray_address=cluster.address, token=token,
                             register_builtins=True, node_name="ray-hybrid")
    actor = load_manifest(REPO / "functions" / "actor").model_dump()
    actor["aws_lambda"] = {"function_name": "actor", "endpoint_url": platform.url}
    with platform.client() as client:
        client.deploy(actor)
        job = client.submit({**SYNC, "placement": {"actors": "lambda"},
                             "stop": {"max_rounds": 2}})
        succeeded(client, job["id"], timeout_s=240)
        actors = wait_for(lambda: len(r := client.invocations("actor", 100)) >= 2 * 2 * 2
                          and r, what="the actor records")
        learner = client.invocations("learner", 100)
    assert {r["backend"] for r in actors} == {"lambda", "ray"}  # through Lambda, served on Ray
    assert all(r["node"] for r in actors if r["backend"] == "ray")
    assert learner and {r["backend"] for r in learner} == {"ray"}


def test_a_function_no_node_can_hold_is_refused_naming_the_field(on_ray: EmbeddedPlatform):
    with on_ray.client() as client:
        code = client.upload_code(fn()["code_dir"])
        base = {**fn("tpu"), "code_dir": None, "code_sha256": code}
        with pytest.raises(GatewayError) as exc:
            client.deploy({**base, "ray": {"resources": {"TPU": 1}}})
        assert exc.value.status == 422 and "ray.resources.TPU" in exc.value.fields
        with pytest.raises(GatewayError) as exc:
            client.deploy({**base, "ray": {"node_label": {"pool": "gpu"}}})
        assert exc.value.status == 422 and "ray.node_label.pool" in exc.value.fields
        with pytest.raises(GatewayError) as exc:
            client.deploy({**base, "cpu": 2})  # 3 cores in all, but one per node
        assert exc.value.status == 422 and "cpu" in exc.value.fields
        with pytest.raises(GatewayError) as exc:  # a folder of this host: nodes cannot see it
            client.deploy(fn("local"))
        assert exc.value.status == 422 and "code_dir" in exc.value.fields
        client.deploy(base)  # uploaded code reaches the node through /init
        out = client.invoke("tpu", {"x": 1})
        assert out["status"] == "success" and out["result"]["args"] == {"x": 1}, out


def test_a_job_whose_function_no_node_can_hold_now_is_refused_at_submit(
        on_ray: EmbeddedPlatform, cluster: Any):
    """Its learner fitted a node that has left since the deploy: the submit is a 422 naming
    the job's field and why, not a job whose first round waits for a node forever."""
    big = cluster.add_node(**{**WORKER, "num_cpus": 2})
    with on_ray.client() as client:
        wait_for(lambda: alive_cores(client) == 5, timeout_s=30, what="the two-core node")
        learner = load_manifest(REPO / "functions" / "learner").model_dump()
        code = client.upload_code(REPO / "functions" / "learner")
        client.deploy({**learner, "name": "big-learner", "cpu": 2, "code_dir": None,
                       "code_sha256": code})
        cluster.remove_node(big)
        wait_for(lambda: alive_cores(client) == 3, timeout_s=30, what="the node to be gone")
        with pytest.raises(GatewayError) as exc:
            client.submit({**SYNC, "learner_function": "big-learner"})
    assert exc.value.status == 422, exc.value
    assert "cpu" in exc.value.fields["learner_function"], exc.value.fields


FORKABLE_MB = ZYGOTE_HEAP_MB + 512  # holds a fork of the zygote (FORK_HEADROOM_MB beyond it)


def started_on_ray(client: Client, name: str, **manifest: Any) -> dict[str, Any]:
    """Deploy a test function big enough to fork (and ``manifest``'s fields), invoke it once:
    its one container."""
    code = client.upload_code(fn()["code_dir"])
    client.deploy({**fn(name), "code_dir": None, "code_sha256": code,
                   "memory_mb": FORKABLE_MB, **manifest})
    out = client.invoke(name, {"x": 1})
    assert out["status"] == "success" and out["cold"], out
    [container] = client.cluster()["functions"][name]["containers"]
    return container


def is_zygote(pid: int | None) -> bool:
    return pid is not None and b"faasrl.runtime.zygote" in cmdline(pid)


def zygote_pids(node: str) -> list[int]:
    """The zygote processes of the gateway node ``node``, one per Ray node with cores."""
    names = [n for n in ray.util.list_named_actors()
             if n.startswith(f"{node}/") and f"/{ZYGOTE_PREFIX}" in n]
    states = ray.get([ray.get_actor(n, namespace="faasrl").state.remote() for n in names],
                     timeout=60)
    return [json.loads(s)["pid"] for s in states]


def test_a_container_forks_from_its_nodes_zygote(on_ray: EmbeddedPlatform):
    """With no actor of its own: its node's zygote actor hosts it, and a placement group holds
    its memory in Ray until it stops."""
    with on_ray.client() as client:
        container = started_on_ray(client, "forked")
        assert is_zygote(parent(container["pid"])), cmdline(parent(container["pid"]) or 0)
        assert len(zygote_pids("ray-test")) == 3  # one per node with cores, none on the head
        assert not [n for n in ray.util.list_named_actors() if n.endswith(container["id"])]
        [group] = groups_of(container["id"])
        assert group["state"] == "CREATED"
        assert group["bundles"][0]["memory"] == FORKABLE_MB * 2**20
        assert group["bundles_to_node_id"][0] == container["node"]

        def memory_mb() -> float | None:  # measured on its node, for the cluster view
            return client.cluster()["functions"]["forked"]["containers"][0]["memory_mb"]

        assert wait_for(memory_mb, timeout_s=30, what="the container's memory") > 0
        client.delete("forked")
        wait_for(lambda: not pid_alive(container["pid"]), timeout_s=30,
                 what="the deleted function's container to end")
        wait_for(lambda: groups_of(container["id"]) == [], timeout_s=30,
                 what="its placement group to be removed")


def groups_of(container_id: str) -> list[dict[str, Any]]:
    """The created placement groups (``placement_group_table``) of a container."""
    return [g for g in created_groups() if g["name"].endswith(f"/{container_id}")]


def created_groups() -> list[dict[str, Any]]:
    return [g for g in ray.util.placement_group_table().values() if g["state"] == "CREATED"]


def test_a_container_starts_as_a_new_interpreter_when_its_zygote_is_gone(
        on_ray: EmbeddedPlatform):
    with on_ray.client() as client:
        first = started_on_ray(client, "forked-first")
        assert is_zygote(parent(first["pid"]))
        for pid in zygote_pids("ray-test"):  # every node's: the next start lands on any
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(first["pid"]), timeout_s=30,
                 what="the forked container to die with its zygote")
        second = started_on_ray(client, "unforked")
    # Still without an actor of its own: its node's zygote actor started it as its child.
    hosted_by = parent(second["pid"])
    assert hosted_by is not None and not is_zygote(hosted_by)
    assert b"ZygoteActor" in cmdline(hosted_by), cmdline(hosted_by)


def test_a_killed_zygote_actor_is_placed_again_and_containers_fork_from_it(
        on_ray: EmbeddedPlatform):
    """Its node lives on: the gateway places another zygote actor there, under the same name,
    rather than giving every later container on that node an actor of its own."""
    with on_ray.client() as client:
        first = started_on_ray(client, "zygote-killed")
        [name] = [n for n in ray.util.list_named_actors() if n.startswith("ray-test/")
                  and n.endswith(f"/{ZYGOTE_PREFIX}{first['node']}")]
        old = zygote_state(name)
        ray.kill(ray.get_actor(name, namespace="faasrl"), no_restart=True)
        wait_for(lambda: not pid_alive(first["pid"]), timeout_s=30,
                 what="the hosted container to end with its zygote actor")

        def placed_again() -> dict[str, Any] | None:
            with contextlib.suppress(ValueError, ray.exceptions.RayActorError):
                state = zygote_state(name)
                return state if state["pid"] != old["pid"] else None
            return None

        wait_for(placed_again, timeout_s=60, what="a new zygote actor on the node")
        second = started_on_ray(client, "after-the-kill")
        assert is_zygote(parent(second["pid"])), cmdline(parent(second["pid"]) or 0)
        assert not [n for n in ray.util.list_named_actors() if n.endswith(second["id"])]


def zygote_state(name: str) -> dict[str, Any]:
    """What the zygote actor ``name`` says of its zygote (``pid``...)."""
    return json.loads(ray.get(ray.get_actor(name, namespace="faasrl").state.remote(),
                              timeout=60))


def test_a_forked_container_whose_actor_is_killed_ends_with_it(on_ray: EmbeddedPlatform):
    """A container with an actor of its own (asked to PACK: an actor's strategy) still forks
    from its node's zygote; its process is the zygote's child, not its actor's: the zygote
    actor ends it."""
    with on_ray.client() as client:
        container = started_on_ray(client, "orphaned", ray={"strategy": "PACK"})
        assert is_zygote(parent(container["pid"])), cmdline(parent(container["pid"]) or 0)
        [name] = [n for n in ray.util.list_named_actors()
                  if n.startswith("ray-test/") and n.endswith(f"/{container['id']}")]
        ray.kill(ray.get_actor(name, namespace="faasrl"), no_restart=True)
        wait_for(lambda: not pid_alive(container["pid"]), timeout_s=30,
                 what="the container of a killed actor to end")


def test_a_restarted_gateway_reaps_its_orphans_and_spares_others(tmp_path, cluster: Any):
    from faasrl.backends.ray_actor import RuntimeActor

    state, port, token = tmp_path / "state", free_port(), "ray-token"
    url = f"http://127.0.0.1:{port}"
    options = ("--backend", "ray", "--ray-address", cluster.address)
    env = {"FAASRL_NODE_NAME": "restart", **RAY_ENV}
    ray.init(address=cluster.address, namespace="faasrl", log_to_driver=False)
    proc = gateway(state, port, token, *options, **env)
    try:
        with gateway_up(url, token, proc, timeout_s=120) as client:
            client.prewarm("echo", 2)  # hosted by the nodes' zygote actors
            wait_for(lambda: len(our_groups()) == 2, timeout_s=60,
                     what="two echo containers' placement groups")
        # An actor of this node whose owner is gone (pid 1 never started at tick 1), and one
        # of another gateway's node: the restarted gateway must reap the first only.
        host = ray.remote(RuntimeActor)
        orphan = host.options(name="restart/1:1/orphan", num_cpus=0).remote("orphan")
        other = host.options(name="elsewhere/1:1/theirs", num_cpus=0).remote("theirs")
        ray.get([orphan.logs.remote(1), other.logs.remote(1)], timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Ray kills a gateway's actors and removes its placement groups with it (neither is
        # detached).
        wait_for(lambda: ours() == ["restart/1:1/orphan"] and not our_groups(), timeout_s=60,
                 what="the killed gateway's actors and groups to go", poll_s=0.2)
        proc = gateway(state, port, token, *options, **env)
        with gateway_up(url, token, proc, timeout_s=120) as client:
            wait_for(lambda: "restart/1:1/orphan" not in ours(), timeout_s=30,
                     what="the orphan to be reaped", poll_s=0.2)
            assert "elsewhere/1:1/theirs" in ray.util.list_named_actors()
            assert client.invoke("echo", {"ok": True})["status"] == "success"
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        wait_for(lambda: ours() == [], timeout_s=30, what="a stopped gateway's actors to go")
        ray.kill(other)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(Exception):
            ray.shutdown()


def ours() -> list[str]:
    """The named actors of the gateway node ``restart`` (its nodes' zygote actors too)."""
    return sorted(n for n in ray.util.list_named_actors() if n.startswith("restart/"))


def our_groups() -> list[str]:
    """The created placement groups of the gateway node ``restart``."""
    return [g["name"] for g in created_groups() if g["name"].startswith("restart/")]
