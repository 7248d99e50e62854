"""Quotas on a running platform: a namespace's containers and jobs, its daily spend, and a
function's reserved concurrency (real runtime processes, real Redis, real HTTP)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from helpers import finished, fn, set_quota, wait_for

from faasrl.client import Client
from faasrl.data.keys import NAMESPACES
from faasrl.invoker.quota import Usage
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import ACTIVE, reached_target
from faasrl.namespaces import DEFAULT, Namespace, Quota

# A short CartPole job (two actors, two envs each): rounds of a second or two.
SHORT = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
         "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
         "stop": {"max_rounds": 3}}


def busy(client: Client, name: str) -> int:
    found = client.cluster()["functions"].get(name, {"containers": []})["containers"]
    return sum(c["state"] == "busy" for c in found)


def test_a_one_container_namespace_runs_two_invocations_in_turn_then_429_naming_the_quota(
        make_platform, r):
    """The quota stored before the gateway starts is applied at its start: two invocations
    at once run one after the other on the one container (the node has room for both), and
    one still waiting at its queue timeout gets 429, Retry-After and the quota's name, on the
    REST API and the Lambda API alike."""
    r.hset(NAMESPACES, DEFAULT,
           Namespace(name=DEFAULT, quota=Quota(containers=1)).model_dump_json())
    platform = make_platform(node_cpu=2, queue_timeout_s=2)
    with platform.client() as client:
        client.deploy(fn("t", handler="fns:sleep", cpu=0.5))
        ids = [client.invoke_async("t", {"s": 1.0}) for _ in range(2)]
        recs = [client.wait(i) for i in ids]
        assert [x["status"] for x in recs] == ["success", "success"], recs
        assert len({x["result"]["pid"] for x in recs}) == 1  # one container, in turn
        assert max(x["queue_s"] for x in recs) >= 0.9  # the second waited for the first
        client.invoke_async("t", {"s": 5})
        wait_for(lambda: busy(client, "t") == 1, what="the one container busy")
        resp = httpx.post(f"{platform.url}/v1/functions/t/invoke", json={"args": {"s": 0}},
                          timeout=30)
        lam = httpx.post(f"{platform.url}/2015-03-31/functions/t/invocations", json={},
                         timeout=30)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "5"
    error = resp.json()["error"]
    assert error["type"] == "QuotaExceeded" and "quota containers=1" in error["message"]
    assert lam.status_code == 429 and lam.headers["x-amzn-errortype"] == \
        "TooManyRequestsException" and "quota containers=1" in lam.json()["message"]


def test_raising_a_quota_lets_a_waiting_invocation_in_at_once(make_platform):
    platform = make_platform(node_cpu=2, queue_timeout_s=60)
    with platform.client() as client:
        client.deploy(fn("t", handler="fns:sleep", cpu=0.5))
        set_quota(platform, DEFAULT, containers=1)
        first = client.invoke_async("t", {"s": 6})
        wait_for(lambda: busy(client, "t") == 1, what="the first running")
        second = client.invoke_async("t", {"s": 0})
        wait_for(lambda: client.cluster()["functions"]["t"]["queued"] == 1, what="queued")
        set_quota(platform, DEFAULT, containers=2)
        rec = client.wait(second)
        assert rec["status"] == "success" and rec["queue_s"] < 4  # not after the first
        assert client.invocation(first)["status"] == "running"


def test_reserved_concurrency_keeps_its_capacity_from_other_functions(make_platform):
    """Two cores; 'r' reserves one invocation's worth (a core): 'g' runs one container at a
    time however many wait, and 'r' starts at once beside it."""
    platform = make_platform(node_cpu=2)
    with platform.client() as client:
        client.deploy(fn("r", handler="fns:sleep", cpu=1, reserved_concurrency=1))
        client.deploy(fn("g", handler="fns:sleep", cpu=1))
        waiting = [client.invoke_async("g", {"s": 3}) for _ in range(2)]
        wait_for(lambda: client.cluster()["functions"]["g"]["queued"] == 1, what="g queued")
        assert busy(client, "g") <= 1
        rec = client.invoke("r", {"s": 0})
        assert rec["status"] == "success" and rec["queue_s"] < 2.5  # not after g's
        assert all(client.wait(i)["status"] == "success" for i in waiting)


def test_a_second_job_waits_pending_for_the_namespaces_one_job(make_platform):
    platform = make_platform(register_builtins=True)
    with platform.client() as client:
        set_quota(platform, DEFAULT, jobs=1)
        first = client.submit({**SHORT, "seed": 1})
        second = client.submit({**SHORT, "seed": 2})
        held = wait_for(lambda: (j := client.job(second["id"]))["held"] and j,
                        what="the second held", timeout_s=30)
        assert held["status"] == "pending" and "quota jobs=1" in held["held"]
        done = [wait_for(lambda i=i: (j := client.job(i))["status"] == "succeeded" and j,
                         timeout_s=180, what="success") for i in (first["id"], second["id"])]
        assert done[1]["started_at"] >= done[0]["finished_at"] - 0.5  # not beside it
        assert done[1]["held"] is None


def test_a_job_over_its_namespaces_daily_spend_pauses_and_runs_on_when_raised(make_platform):
    platform = make_platform(register_builtins=True)
    with platform.client() as client:
        set_quota(platform, DEFAULT, spend_usd_per_day=1e-9)  # one round spends it
        job = client.submit({**SHORT, "seed": 3})
        paused = wait_for(lambda: (j := client.job(job["id"]))["status"] == "paused" and j,
                          timeout_s=120, what="the job paused")
        assert paused["round"] == 1 and "spend_usd_per_day=1e-09" in paused["held"]
        time.sleep(1.0)
        assert client.job(job["id"])["round"] == 1  # no round while paused
        set_quota(platform, DEFAULT, spend_usd_per_day=100)
        done = wait_for(lambda: (j := client.job(job["id"]))["status"] == "succeeded" and j,
                        timeout_s=120, what="the job to finish")
        assert done["round"] == 3 and done["held"] is None


# examples/cartpole.yaml's job (two actors of the family's default envs and steps, a training
# mean of 475 over 20 episodes) without its evaluations: the target is confirmed by none.
LEARN = {"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 2},
         "evaluation_episodes": 0, "stop": {"target_reward": 475, "target_window": 20,
                                            "max_rounds": 300}}
# Two cores: each namespace may keep one busy (lab-a by containers, lab-b by cores).
LOAD_QUOTAS = {"lab-a": Quota(containers=1), "lab-b": Quota(cores=1.0)}


def _on_gateway(platform: Any, coro: Any) -> Any:
    svc = platform._app.state.services
    return asyncio.run_coroutine_threadsafe(coro, svc.invoker._ticker.get_loop()).result(60)


def _submit(platform: Any, namespace: str, spec: dict[str, Any]) -> str:
    """Submit as a key of ``namespace`` would (the job is the namespace's)."""
    svc = platform._app.state.services
    return _on_gateway(platform, svc.jobs.submit(JobSpec.model_validate(spec), namespace)).id


def _job(platform: Any, job_id: str) -> dict[str, Any]:
    """A job of any namespace as the job store has it (the root client sees default's only)."""
    svc = platform._app.state.services
    return _on_gateway(platform, svc.jobs.get(job_id)).model_dump(mode="json")


def _usage(platform: Any) -> dict[str, Usage]:
    svc = platform._app.state.services

    async def read() -> dict[str, Usage]:
        return {ns: svc.invoker.usage(ns) for ns in LOAD_QUOTAS}

    return _on_gateway(platform, read())


def _over(usage: Usage, quota: Quota) -> list[str]:
    return [name for name in ("cores", "memory_mb", "gpus", "containers")
            if getattr(quota, name) is not None
            and getattr(usage, name) > getattr(quota, name) + 1e-9]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_eight_cartpole_jobs_in_two_namespaces_with_quotas_learn_as_each_alone(make_platform):
    """Seeds 21-28, each alone first, then all eight at once, four in lab-a and four in
    lab-b, each namespace held to one busy container's worth: all finish, each reaches the
    target within 1.5x its rounds alone, and no sample of what a namespace holds (every
    0.5 s) exceeds its quota."""
    seeds = list(range(21, 29))
    namespaces = ["lab-a"] * 4 + ["lab-b"] * 4
    # Memory for every job's learner and actors: what the quotas share is the cores.
    platform = make_platform(register_builtins=True, node_memory_mb=8 * (4096 + 2 * 2048))
    with platform.client() as client:
        alone: dict[int, int] = {}
        for seed in seeds:
            job = finished(client, client.submit({**LEARN, "seed": seed})["id"], 600)
            assert reached_target(job["stop_reason"]), job
            alone[seed] = job["round"]
            print(f"seed {seed} alone: {job['round']} rounds, wall {job['wall_s']:.0f} s",
                  flush=True)
        for ns, quota in LOAD_QUOTAS.items():
            set_quota(platform, ns, **quota.model_dump(exclude_none=True))
        t0 = time.monotonic()
        ids = [_submit(platform, ns, {**LEARN, "seed": seed})
               for ns, seed in zip(namespaces, seeds, strict=True)]
        peak = {ns: Usage() for ns in LOAD_QUOTAS}
        over: list[tuple[float, str, list[str]]] = []
        samples = 0
        while any(_job(platform, i)["status"] in ACTIVE for i in ids):
            assert time.monotonic() - t0 < 2400, "the eight jobs took over 40 minutes"
            for ns, u in _usage(platform).items():
                samples += 1
                if bad := _over(u, LOAD_QUOTAS[ns]):
                    over.append((time.monotonic() - t0, ns, bad))
                p = peak[ns]
                peak[ns] = Usage(max(p.cores, u.cores), max(p.memory_mb, u.memory_mb),
                                 max(p.gpus, u.gpus), max(p.containers, u.containers))
            time.sleep(0.5)
        wall = time.monotonic() - t0
        together = [_job(platform, i) for i in ids]
    print(f"\n8 jobs in {wall:.0f} s, {samples} samples; peak usage {peak}")
    for seed, ns, job in zip(seeds, namespaces, together, strict=True):
        print(f"seed {seed} {ns}: {job['round']} rounds together, {alone[seed]} alone "
              f"({job['round'] / alone[seed]:.2f}x), wall {job['wall_s']:.0f} s")
    assert over == []
    for seed, job in zip(seeds, together, strict=True):
        assert job["status"] == "succeeded" and reached_target(job["stop_reason"]), job
        assert job["round"] <= 1.5 * alone[seed], (seed, job["round"], alone[seed])
    assert all(peak[ns].cores > 0 for ns in LOAD_QUOTAS)  # both namespaces ran
