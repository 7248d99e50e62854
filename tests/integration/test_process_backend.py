"""The process backend: real subprocesses, process groups, pid records and orphan reaping."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from helpers import TEST_FUNCTIONS, pid_alive, wait_for

from faasrl.backends.process import ProcessBackend, process_start_time
from faasrl.invoker.runtime_client import RuntimeClient
from faasrl.manifest import FunctionSpec

SPEC = FunctionSpec(name="t", handler="fns:spawn_child", code_dir=str(TEST_FUNCTIONS))


async def _start_and_init(backend: ProcessBackend, cid: str):
    handle = await backend.start(SPEC, cid)
    client = RuntimeClient(handle.host, handle.port, handle.secret)
    status, _ = await client.request("GET", "/healthz", timeout=10)
    assert status == 200
    status, _ = await client.request("POST", "/init", {"handler": SPEC.handler}, timeout=10)
    assert status == 200
    return handle, client


def test_start_run_stop_kills_the_whole_process_group(tmp_path):
    async def scenario():
        backend = ProcessBackend(tmp_path)
        handle, client = await _start_and_init(backend, "c1")
        assert (tmp_path / "containers" / "c1.json").exists()
        _, out = await client.request("POST", "/run", {"args": None}, timeout=10)
        child = out["result"]["child"]
        assert pid_alive(child) and backend.exit_code(handle) is None
        stats = backend.stats(handle)
        assert stats is not None and stats.memory_mb > 1
        client.close()
        await backend.stop(handle, grace_s=1.0)
        return handle.pid, child

    pid, child = asyncio.run(scenario())
    assert not pid_alive(pid)
    assert not pid_alive(child)  # the grandchild went with its group
    assert not (tmp_path / "containers" / "c1.json").exists()


def test_exit_is_noticed_and_logs_are_kept(tmp_path):
    async def scenario():
        backend = ProcessBackend(tmp_path)
        handle, client = await _start_and_init(backend, "c1")
        await client.request("POST", "/run", {"args": None}, timeout=10)
        os.kill(handle.pid, 9)
        await asyncio.sleep(0)
        code = wait_for(lambda: backend.exit_code(handle), what="the exit")
        assert "listening" in backend.logs(handle)
        client.close()
        await backend.stop(handle)
        return code

    assert asyncio.run(scenario()) == -9


def test_close_stops_everything(tmp_path):
    async def scenario():
        backend = ProcessBackend(tmp_path)
        handles = [(await _start_and_init(backend, f"c{i}"))[0] for i in range(3)]
        assert len(backend.list_own()) == 3
        await backend.close()
        return [h.pid for h in handles]

    assert not any(pid_alive(p) for p in asyncio.run(scenario()))
    assert list((tmp_path / "containers").iterdir()) == []


def test_orphans_of_a_dead_platform_are_reaped(tmp_path):
    records = tmp_path / "containers"
    records.mkdir()
    orphan = subprocess.Popen([sys.executable, "-m", "faasrl.runtime", "--port", "0"],
                              stdout=subprocess.DEVNULL, start_new_session=True)
    dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner.wait()
    (records / "old.json").write_text(json.dumps({
        "id": "old", "pid": orphan.pid, "start_time": process_start_time(orphan.pid),
        "owner_pid": dead_owner.pid, "owner_start": 12345}))
    # A record whose pid now belongs to another process (here: this test) must not be acted on.
    (records / "recycled.json").write_text(json.dumps({
        "id": "recycled", "pid": os.getpid(), "start_time": 1,
        "owner_pid": dead_owner.pid, "owner_start": 12345}))
    assert ProcessBackend(tmp_path).reap_orphans() == 1
    assert orphan.wait(5) == -9
    assert pid_alive(os.getpid())
    assert list(records.iterdir()) == []


def test_records_of_a_live_owner_are_left_alone(tmp_path):
    records = tmp_path / "containers"
    records.mkdir()
    (records / "owned.json").write_text(json.dumps({
        "id": "owned", "pid": 1, "start_time": process_start_time(1),
        "owner_pid": os.getpid(), "owner_start": process_start_time(os.getpid())}))
    assert ProcessBackend(tmp_path).reap_orphans() == 0
    assert (records / "owned.json").exists()


def test_missing_code_dir_fails_to_start(tmp_path):
    spec = SPEC.model_copy(update={"code_dir": str(tmp_path / "gone")})

    async def scenario():
        try:
            await ProcessBackend(tmp_path).start(spec, "c1")
        except FileNotFoundError as exc:
            return str(exc)
        return ""

    assert "code_dir" in asyncio.run(scenario())
