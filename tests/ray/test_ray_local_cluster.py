"""``faasrl up --backend ray`` with no address: a one-node Ray cluster of the gateway's own,
started and stopped as users do (a ``faasrl up`` process, signalled).

Its workers, its zygote and its functions see none of the gateway's environment; it and
everything it starts listen on loopback only; SIGTERM and SIGINT stop it with exit status 0;
and it leaves nothing behind, neither processes nor files (Ray's ``ray_current_cluster``, which
would send a later plain ``ray.init()`` on the machine to the dead cluster).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    LOOPBACK_HEX,
    RAY_ENV,
    cmdline,
    descendants,
    fn,
    gateway,
    gateway_up,
    listening_sockets,
    parent,
    pid_alive,
    ray_tmp_dir,
    succeeded,
    wait_for,
)

from faasrl.backends.process import ZYGOTE_HEAP_MB
from faasrl.client import Client
from faasrl.redis_server import free_port

pytest.importorskip("ray", reason="the Ray backend needs the ray package (make install)")

pytestmark = pytest.mark.ray

TOKEN = "ray-token"
ROUNDS = 5


@pytest.fixture
def system_tmp() -> Iterator[Path]:
    """The gateway's TMPDIR and RAY_TMPDIR: where Ray's files go unless told otherwise."""
    with ray_tmp_dir() as path:
        yield path


@contextlib.contextmanager
def local_cluster_gateway(tmp_path: Path, system_tmp: Path,
                          **env: str) -> Iterator[tuple[subprocess.Popen[bytes], Client]]:
    """``faasrl up --backend ray`` on one core; the gateway and its cluster are killed after,
    whatever the test did."""
    port = free_port()
    proc = gateway(tmp_path / "state", port, TOKEN, "--backend", "ray", FAASRL_NODE_CPU="1",
                   TMPDIR=str(system_tmp), RAY_TMPDIR=str(system_tmp), **RAY_ENV, **env)
    try:
        with gateway_up(f"http://127.0.0.1:{port}", TOKEN, proc, timeout_s=120) as client:
            yield proc, client
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        # The cluster's processes name its files, all under system_tmp: ours alone.
        for pid in (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()):
            if str(system_tmp).encode() in cmdline(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def stop(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the gateway; it must exit 0 and take every process it started with it."""
    tree = descendants(proc.pid)
    proc.send_signal(signum)
    assert proc.wait(90) == 0, f"faasrl up exited with {proc.returncode} on {signum!r}"
    wait_for(lambda: not any(pid_alive(pid) for pid in tree), timeout_s=30,
             what="the local cluster's processes to end")


def assert_nothing_left(system_tmp: Path) -> None:
    """No file of the cluster is left where Ray keeps them (``ray_current_cluster`` above all:
    a later ``ray.init(num_cpus=2)`` would try to join the dead cluster)."""
    assert not (system_tmp / "ray" / "ray_current_cluster").exists()
    assert sorted(p.name for p in system_tmp.iterdir()) == []


def test_up_with_no_address_runs_its_own_cluster_on_loopback_and_stops_on_sigterm(
        tmp_path: Path, system_tmp: Path):
    """Its workers, its zygote and its functions see none of the gateway's secrets; every
    socket of the gateway, the cluster, its workers and the function runtimes listens on
    loopback only."""
    with local_cluster_gateway(tmp_path, system_tmp,
                               AWS_SECRET_ACCESS_KEY="gw-secret") as (proc, client):
        assert client.cluster()["capacity"]["cpu"] == 1  # its own one-core cluster
        code = client.upload_code(fn()["code_dir"])
        client.deploy({**fn("env", handler="fns:env"), "code_dir": None, "code_sha256": code,
                       "memory_mb": ZYGOTE_HEAP_MB + 512})  # forked from the node's zygote
        out = client.invoke("env", ["FAASRL_TOKEN", "AWS_SECRET_ACCESS_KEY", "HOME"])
        assert out["status"] == "success", out
        assert out["result"]["FAASRL_TOKEN"] is None
        assert out["result"]["AWS_SECRET_ACCESS_KEY"] is None
        assert "faasrl-" in out["result"]["HOME"]
        [container] = client.cluster()["functions"]["env"]["containers"]
        zygote = parent(container["pid"])
        assert b"faasrl.runtime.zygote" in cmdline(zygote or 0), cmdline(zygote or 0)
        actor = parent(zygote)  # the Ray worker hosting the node's zygote actor
        for pid in (zygote, actor, container["pid"]):
            assert b"gw-secret" not in environ(pid) and TOKEN.encode() not in environ(pid)

        tree = descendants(proc.pid)
        sockets = listening_sockets(tree)
        listeners = {pid for pid, _, _ in sockets}
        # The gateway, the GCS, the raylet and the function's runtime are among them.
        assert {proc.pid, container["pid"]} <= listeners, sockets
        assert any(b"gcs_server" in cmdline(pid) for pid in listeners), sockets
        assert any(b"raylet" in cmdline(pid) for pid in listeners), sockets
        beyond = [(pid, address, port, cmdline(pid)[:80]) for pid, address, port in sockets
                  if address not in LOOPBACK_HEX]
        assert beyond == [], beyond
        assert any(system_tmp.glob("faasrl-ray-*/session_*"))  # its files: in a private dir
        stop(proc, signal.SIGTERM)
    assert_nothing_left(system_tmp)


def test_a_local_cluster_stops_on_sigint_and_leaves_nothing(tmp_path: Path, system_tmp: Path):
    with local_cluster_gateway(tmp_path, system_tmp) as (proc, client):
        assert client.invoke("echo", {"x": 1})["status"] == "success"
        stop(proc, signal.SIGINT)
    assert_nothing_left(system_tmp)


def test_a_job_asking_more_cores_than_the_cluster_has_keeps_its_learner_warm(
        make_platform: Any, monkeypatch: pytest.MonkeyPatch, system_tmp: Path):
    """2 one-core actors and a one-core learner on a 2-core local cluster (as in the Ray
    guide's figures, docs/guides/scale-out.md): the learner stays warm from round to round, not
    evicted for the actors' cores and started cold again each round."""
    for key, value in {**RAY_ENV, "RAY_TMPDIR": str(system_tmp)}.items():
        monkeypatch.setenv(key, value)
    platform = make_platform(backend="ray", node_cpu=2, register_builtins=True)
    with platform.client() as client:
        assert client.cluster()["capacity"]["cpu"] == 2
        job = client.submit({"env_id": "CartPole-v1", "envs_per_actor": 2,
                             "steps_per_actor": 128, "evaluation_episodes": 0,
                             "controller": {"name": "fixed", "actors": 2},
                             "stop": {"max_rounds": ROUNDS}})
        done = succeeded(client, job["id"], timeout_s=240)

        def learner_records() -> list[dict[str, Any]]:  # this job's (Redis outlives the test)
            return sorted((r for r in client.invocations("learner", 100)
                           if r["requested_at"] >= done["started_at"]),
                          key=lambda r: r["requested_at"])

        learner = wait_for(lambda: len(r := learner_records()) >= ROUNDS and r,
                           what="the learner's records")
    assert [r["cold"] for r in learner] == [True] + [False] * (len(learner) - 1)


def environ(pid: int | None) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()
