"""Fault injection on the process backend: kill -9 of each part of a running job, and Redis
going away under it. After each fault the job must finish with whole metrics rows (one per round,
none missing or twice, every round's full batch, running sums that agree) and every answered
invocation must have its record. Each test prints how long the fault stalled the job.
"""

from __future__ import annotations

import os
import signal
import statistics
import time

import pytest
from helpers import (
    assert_rows_whole,
    at_round,
    every_invocation_recorded,
    finished,
    gateway_up,
    pid_alive,
    stall,
    wait_for,
)

from faasrl.client import Client, GatewayError
from faasrl.redis_server import EmbeddedRedis, free_port

pytestmark = pytest.mark.faults

ROUNDS = 10
# Rounds long enough (about 0.2 s) that a fault found at round 3 lands before the job ends.
SYNC = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 1024,
        "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
        "stop": {"max_rounds": ROUNDS}}
SYNC_STEPS = 2 * 2 * 1024
ASYNC = {**SYNC, "execution": "async", "asynchronous": {"max_learners": 2}}
# conftest's platform: on its own embedded (supervised, password-protected) Redis
PLATFORM = {"redis_url": None, "register_builtins": True}


def busy_pid(client: Client, function: str, timeout_s: float = 60) -> int:
    """The pid of a container of ``function`` while it runs an invocation."""
    def find() -> int | None:
        pool = client.cluster()["functions"].get(function, {"containers": []})
        return next((c["pid"] for c in pool["containers"] if c["state"] == "busy"), None)

    return wait_for(find, timeout_s=timeout_s, what=f"a busy {function} container",
                    poll_s=0.005)


def containers_of(client: Client, function: str) -> set[str]:
    """The ids of the containers ``function`` has now."""
    pool = client.cluster()["functions"].get(function, {"containers": []})
    return {c["id"] for c in pool["containers"]}


def report(what: str, seconds: float) -> None:
    print(f"\nfault disruption: {what}: job stalled {seconds:.2f} s")


@pytest.mark.parametrize("function", ["actor", "learner"])
def test_a_killed_function_container_loses_nothing(client: Client, platform, function):
    job = client.submit(SYNC)
    at_round(client, job["id"], 3)
    before = containers_of(client, function)
    os.kill(busy_pid(client, function), signal.SIGKILL)
    assert client.job(job["id"])["round"] < ROUNDS  # the fault hit the running job
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    rows = client.job_metrics(job["id"])
    assert_rows_whole(rows, ROUNDS, SYNC_STEPS)
    # The lost container was replaced: one started after the kill served the function (a
    # killed actor's slot did not move in with the other slot, to run after it every round).
    served = {r["container"] for r in client.invocations(function, limit=1000)}
    assert served - before, (served, before)
    restarts = sum(r["env_restarts"] for r in rows)
    assert restarts == done["env_restarts"] and (restarts >= 1) == (function == "actor")
    every_invocation_recorded(client, "actor", 2 * ROUNDS)
    report(f"kill -9 of the {function}", stall(rows))


def test_a_killed_parameter_function_loses_nothing(client: Client, platform):
    job = client.submit(ASYNC)
    at_round(client, job["id"], 3)
    os.kill(busy_pid(client, "parameter"), signal.SIGKILL)
    done = finished(client, job["id"], timeout_s=240)
    assert done["status"] == "succeeded", done
    rows = client.job_metrics(job["id"])
    assert_rows_whole(rows, ROUNDS)
    assert all(r["gradients_aggregated"] + r["gradients_dropped"] >= 1 for r in rows)
    report("kill -9 of the parameter function", stall(rows))


def test_a_killed_embedded_redis_is_restarted_and_the_job_goes_on(client: Client, platform):
    job = client.submit(SYNC)
    at_round(client, job["id"], 3)
    busy_pid(client, "actor")
    dead = platform.redis.pid
    os.kill(dead, signal.SIGKILL)
    t0 = time.monotonic()
    wait_for(lambda: platform.redis.restarts == 1, what="the supervisor's restart")
    assert not pid_alive(dead)  # reaped, not a zombie
    back = time.monotonic() - t0
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    rows = client.job_metrics(job["id"])
    assert_rows_whole(rows, ROUNDS, SYNC_STEPS)
    assert client.health()["redis"] == "ok"
    every_invocation_recorded(client, "actor", 2 * ROUNDS)
    report(f"kill -9 of the embedded Redis (back after {back:.2f} s)", stall(rows))


def test_a_redis_restart_during_the_actors_phase(make_platform, tmp_path):
    """An external Redis (as compose runs it) stops while actors write and comes back on the
    same port 1.5 s later: no actor slot is lost, no round trains on part of its batch."""
    server = EmbeddedRedis(tmp_path / "redis", password="pw-restart").start()
    try:
        platform = make_platform(redis_url=server.url, register_builtins=True)
        with platform.client() as client:
            job = client.submit(SYNC)
            at_round(client, job["id"], 3)
            busy_pid(client, "actor")
            server.stop()
            time.sleep(1.5)
            server.start()
            done = finished(client, job["id"])
            assert done["status"] == "succeeded", done
            rows = client.job_metrics(job["id"])
            assert_rows_whole(rows, ROUNDS, SYNC_STEPS)
            assert all(r["actor_failures"] == 0 or r["env_steps"] == SYNC_STEPS for r in rows)
            every_invocation_recorded(client, "actor", 2 * ROUNDS)
            report("a Redis restart during the actors' phase (1.5 s down)", stall(rows))
    finally:
        server.stop()


def test_a_killed_gateway_resumes_its_job(tmp_path, platforms):
    state, port, token = tmp_path / "state", free_port(), "fault-token"
    url = f"http://127.0.0.1:{port}"
    proc = platforms.gateway(state, port, token)
    with gateway_up(url, token, proc) as client:
        job = client.submit(SYNC)
        at_round(client, job["id"], 3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    proc = platforms.gateway(state, port, token)
    with gateway_up(url, token, proc) as client:
        before = client.job(job["id"])["round"]
        at_round(client, job["id"], before + 1)
        stalled = time.monotonic() - t0
        done = finished(client, job["id"])
        assert done["status"] == "succeeded", done
        rows = client.job_metrics(job["id"])
        assert_rows_whole(rows, ROUNDS, SYNC_STEPS)
        report("kill -9 of the gateway (with its embedded Redis and containers)",
               stalled - statistics.median(r["round_s"] for r in rows))


def test_an_answered_invocation_keeps_its_record_across_a_redis_outage_and_sigterm(tmp_path,
                                                                                 platforms):
    """Redis is down when the invocation is answered and still down when the gateway stops:
    the record waits in the spool and is in Redis once both are back."""
    server = EmbeddedRedis(tmp_path / "redis", password="pw-spool").start()
    state, port, token = tmp_path / "state", free_port(), "spool-token"
    url = f"http://127.0.0.1:{port}"
    env = {"FAASRL_REDIS_URL": server.url, "FAASRL_REGISTER_BUILTINS": "true"}
    proc = platforms.gateway(state, port, token, **env)
    try:
        with gateway_up(url, token, proc) as client:
            client.invoke("echo", {"warm": True})
            server.stop()
            answered = client.invoke("echo", {"n": 1})
            assert answered["status"] == "success"
            try:  # still queued for its batch: read there (read-your-writes), never a 404
                assert client.invocation(answered["id"])["id"] == answered["id"]
            except GatewayError as exc:
                assert exc.status == 503  # already spooled: where Redis is, it is down
            # The running snapshot's batch is spooled first; the final one waits in the
            # backlog for the writer's next try (retry_s), then follows it into the spool.
            wait_for(lambda: _read_status(client, answered["id"]) == 503,
                     what="the read to find Redis down")
            assert (state / "records.spool").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        log = b"".join(p.read_bytes() for p in tmp_path.glob("gateway-*.log"))
        assert b"shutdown failed" not in log.lower(), log[-2000:]
        assert (state / "records.spool").exists()
        server.start()
        proc = platforms.gateway(state, port, token, **env)
        with gateway_up(url, token, proc) as client:
            rec = wait_for(lambda: _record(client, answered["id"]), what="the spooled record")
            assert rec["status"] == "success" and rec["result"]["echo"] == {"n": 1}
        assert not (state / "records.spool").exists()
    finally:
        platforms.stop_all()  # before its Redis
        server.stop()


def _read_status(client: Client, invocation_id: str) -> int:
    """200 if the record reads, else the gateway's error status."""
    try:
        client.invocation(invocation_id)
    except GatewayError as exc:
        return exc.status
    return 200


def _record(client: Client, invocation_id: str) -> dict | None:
    try:
        return client.invocation(invocation_id)
    except GatewayError:
        return None
