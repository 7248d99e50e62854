"""The process backend's zygote: containers forked from it are what a new interpreter would have
been (session, environment, limits, fds, user), stop and exit as before, and a container starts
without it when it is gone. Real processes throughout."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    TEST_FUNCTIONS,
    fn,
    half_imported_torch,
    pid_alive,
    wait_for,
    with_python_path,
)

import faasrl.backends.process as process
from faasrl.backends.process import (
    FORK_HEADROOM_MB,
    FUNCTION_USER_NAME,
    PASSED_ENV,
    ZYGOTE_HEAP_MB,
    ProcessBackend,
)
from faasrl.invoker.runtime_client import RuntimeClient, RuntimeGone
from faasrl.manifest import FunctionSpec

# Big enough to be forked (the zygote's heap is counted against it, see FORK_HEADROOM_MB).
PROBE = FunctionSpec(name="probe", handler="forked:probe", code_dir=str(TEST_FUNCTIONS),
                     cpu=2, memory_mb=1024)


def zygote_backend(state_dir: Path, **kw: Any) -> ProcessBackend:
    backend = ProcessBackend(state_dir, zygote=True, **kw)
    assert backend.zygote is not None and backend.zygote.wait_ready(120), \
        (state_dir / "logs" / "zygote.log").read_text()
    return backend


async def started(backend: ProcessBackend, cid: str, spec: FunctionSpec = PROBE
                  ) -> tuple[Any, RuntimeClient]:
    handle = await backend.start(spec, cid)
    client = RuntimeClient(handle.host, handle.port, handle.secret)
    status, out = await client.request("POST", "/init", {"handler": spec.handler}, timeout=30)
    assert status == 200, (out, backend.logs(handle))
    return handle, client


async def run(client: RuntimeClient) -> dict[str, Any]:
    status, out = await client.request("POST", "/run", {"args": None}, timeout=30)
    assert status == 200 and "result" in out, out
    return out["result"]


def record(state_dir: Path, cid: str) -> dict[str, Any]:
    return json.loads((state_dir / "containers" / f"{cid}.json").read_text())


def run_once(state_dir: Path, spec: FunctionSpec = PROBE) -> tuple[dict[str, Any], dict[str, Any],
                                                                   int]:
    """One container ``c1`` of ``spec`` on a zygote backend, run once: what its handler saw,
    its record and the zygote's pid."""
    async def scenario():
        backend = zygote_backend(state_dir)
        try:
            _, client = await started(backend, "c1", spec)
            out = await run(client)
            client.close()
            return out, record(state_dir, "c1"), backend.zygote.pid
        finally:
            await backend.close()

    return asyncio.run(scenario())


def test_a_forked_container_is_what_a_new_interpreter_would_be(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "gateway-secret")  # the gateway's, not theirs
    out, rec, zygote_pid = run_once(tmp_path)
    assert out["ppid"] == zygote_pid == rec["zygote"]  # forked, not a new interpreter
    assert out["pgid"] == out["sid"] == out["pid"]  # a session of its own: killpg reaches all
    home = rec["tmp"]
    expected = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    user = pwd.getpwuid(os.geteuid()).pw_name
    expected.update(PYTHONPATH=out["env"]["PYTHONPATH"], PYTHONUNBUFFERED="1",
                    OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", CUDA_VISIBLE_DEVICES="",
                    FAASRL_CONTAINER_ID="c1", HOME=home, TMPDIR=home, USER=user, LOGNAME=user)
    assert out["env"] == expected  # exactly: none of the zygote's, none of the gateway's
    assert out["tmp"] == out["home"] == home and "faasrl-c1-" in home
    assert out["user"] == user
    assert out["cwd"] == str(TEST_FUNCTIONS)
    assert out["data_limit"] == 1024 * 1024 * 1024
    assert out["dumpable"] == 0
    log = str(tmp_path / "logs" / "c1.log")
    assert out["fds"]["0"] == "/dev/null" and out["fds"]["1"] == out["fds"]["2"] == log
    others = {fd: target for fd, target in out["fds"].items() if int(fd) > 2}
    # The listening socket, the invoker's connection and the run's thread's schedstat (the
    # runtime's own wait_s reading); no pipe, file or socket of the zygote.
    sockets = [t for t in others.values() if t.startswith("socket:")]
    schedstats = [t for t in others.values()
                  if re.fullmatch(rf"/proc/{out['pid']}/task/\d+/schedstat", t)]
    assert len(sockets) == 2 and len(schedstats) == 1 and len(others) == 3, others
    assert out["torch_threads"] == 2  # its cpu, not the zygote's one thread


def test_siblings_do_not_share_random_state(tmp_path):
    async def scenario():
        backend = zygote_backend(tmp_path)
        try:
            outs = []
            for cid in ("c1", "c2"):
                _, client = await started(backend, cid)
                outs.append(await run(client))
                client.close()
            return outs
        finally:
            await backend.close()

    a, b = asyncio.run(scenario())
    assert a["ppid"] == b["ppid"]
    for key in ("random", "numpy_random", "torch_random"):
        assert a[key] != b[key], key


def test_a_handler_importing_what_the_zygote_lacks_works(tmp_path):
    out, _, _ = run_once(tmp_path)
    assert (out["sqlite3_preloaded"], out["sqlite3"]) == (False, 42)


def test_stop_kills_a_forked_containers_group_and_its_exit_is_seen(tmp_path):
    spawner = PROBE.model_copy(update={"handler": "fns:spawn_child"})
    crasher = PROBE.model_copy(update={"handler": "fns:crash"})

    async def scenario():
        backend = zygote_backend(tmp_path)
        try:
            handle, client = await started(backend, "c1", spawner)
            child = (await run(client))["child"]
            assert pid_alive(child) and backend.exit_code(handle) is None
            client.close()
            await backend.stop(handle, grace_s=1.0)
            stopped = handle.pid, child

            handle, client = await started(backend, "c2", crasher)
            assert record(tmp_path, "c2")["zygote"] == backend.zygote.pid
            with pytest.raises(RuntimeGone):
                await client.request("POST", "/run", {"args": None}, timeout=30)
            code = wait_for(lambda: backend.exit_code(handle), what="the exit")
            client.close()
            await backend.stop(handle)
            return stopped, code, handle.pid
        finally:
            await backend.close()

    (pid, child), code, crashed = asyncio.run(scenario())
    assert not pid_alive(child)  # the grandchild went with its group
    assert not os.path.exists(f"/proc/{pid}")  # and the leader was reaped, not left a zombie
    assert code == 3
    assert not os.path.exists(f"/proc/{crashed}")
    assert list((tmp_path / "containers").iterdir()) == []


def test_without_its_zygote_a_container_starts_as_a_new_interpreter(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "RESPAWN_S", 0.0)

    async def scenario():
        backend = zygote_backend(tmp_path)
        try:
            assert backend.zygote_state() == "ready"
            forked, _ = await started(backend, "c1")
            old = backend.zygote
            os.kill(old.pid, signal.SIGKILL)
            wait_for(lambda: old.gone, what="the zygote's death to be noticed")
            assert backend.zygote_state() == "gone"
            # Its children die with it (their parent-death signal).
            assert wait_for(lambda: backend.exit_code(forked)) == -signal.SIGKILL
            _, client = await started(backend, "c2")
            out = await run(client)
            client.close()
            assert backend.zygote is not None and backend.zygote is not old  # a new one
            assert backend.zygote.wait_ready(120)
            _, client = await started(backend, "c3")
            client.close()
            return old.pid, record(tmp_path, "c2"), out, backend.zygote.pid, \
                record(tmp_path, "c3")
        finally:
            await backend.close()

    old, rec, out, new, rec3 = asyncio.run(scenario())
    assert rec["zygote"] is None and out["ppid"] == os.getpid()
    assert out["data_limit"] == 1024 * 1024 * 1024
    assert rec3["zygote"] == new != old
    assert list((tmp_path / "containers").iterdir()) == []


def start_while_importing(tmp_path: Path, spec: FunctionSpec) -> tuple[dict, dict, bool]:
    """A container started as soon as the backend (and its zygote, whose imports take a
    second or more) is: its answer, its record, and whether the zygote got ready."""
    async def scenario():
        backend = ProcessBackend(tmp_path, zygote=True)
        try:
            assert backend.zygote_state() == "importing"  # torch takes a second or more
            _, client = await started(backend, "c1", spec)
            out = await run(client)
            client.close()
            return out, record(tmp_path, "c1"), backend.zygote.wait_ready(120)
        finally:
            await backend.close()

    return asyncio.run(scenario())


def test_a_start_too_small_to_fork_does_not_wait_for_the_zygotes_imports(tmp_path):
    small = PROBE.model_copy(update={"memory_mb": ZYGOTE_HEAP_MB + FORK_HEADROOM_MB - 1})
    out, rec, ready = start_while_importing(tmp_path, small)
    assert rec["zygote"] is None and out["ppid"] == os.getpid()
    assert ready  # and it did get ready meanwhile


def test_a_start_that_could_fork_waits_for_the_zygotes_imports(tmp_path):
    out, rec, ready = start_while_importing(tmp_path, PROBE)
    assert ready and rec["zygote"] is not None and out["ppid"] == rec["zygote"]


def test_a_relative_code_dir_is_the_gateways_not_the_zygotes(tmp_path, monkeypatch):
    monkeypatch.chdir(TEST_FUNCTIONS.parent)
    relative = PROBE.model_copy(update={"code_dir": TEST_FUNCTIONS.name})
    out, rec, _ = run_once(tmp_path, relative)
    assert rec["zygote"] is not None and out["cwd"] == str(TEST_FUNCTIONS)


def test_a_small_function_is_not_forked(tmp_path):
    small = PROBE.model_copy(update={"memory_mb": 256})  # less than the zygote's heap + room
    out, rec, _ = run_once(tmp_path, small)
    assert rec["zygote"] is None and out["ppid"] == os.getpid()


def test_a_dead_platforms_zygote_and_its_containers_are_reaped(tmp_path):
    async def scenario():
        backend = zygote_backend(tmp_path)
        handle, client = await started(backend, "c1")
        client.close()
        zygote = backend.zygote.pid
        dead = subprocess.Popen(["true"])
        dead.wait()
        for path in (tmp_path / "containers").iterdir():  # as if their owner had died
            rec = json.loads(path.read_text())
            path.write_text(json.dumps({**rec, "owner_pid": dead.pid, "owner_start": 1}))
        reaped = ProcessBackend(tmp_path).reap_orphans()
        wait_for(lambda: not pid_alive(handle.pid), what="the container's end")
        await backend.close()
        return reaped, zygote, handle.pid

    reaped, zygote, pid = asyncio.run(scenario())
    assert reaped == 2
    assert not pid_alive(zygote) and not pid_alive(pid)


def half_importing(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Functions (and the zygote) get ``half_imported_torch`` on their PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", half_imported_torch(folder))


def test_a_zygote_left_half_imported_forks_nothing_and_says_why(tmp_path, monkeypatch):
    half_importing(tmp_path / "shadow", monkeypatch)
    monkeypatch.setattr(process, "RESPAWN_S", 0.0)

    async def scenario():
        backend = ProcessBackend(tmp_path / "state", zygote=True)
        try:
            zygote = backend.zygote
            assert not zygote.wait_ready(120)
            state, missing = backend.zygote_state(), backend.zygote_not_preloaded()
            for cid in ("c1", "c2"):  # fork-sized; the second after the zygote is gone
                _, client = await started(backend, cid)
                out = await run(client)
                client.close()
                wait_for(lambda: zygote.gone, what="the unfit zygote to exit")
                assert out["ppid"] == os.getpid() and record(tmp_path / "state", cid)["zygote"] \
                    is None, cid  # a new interpreter, not a fork
            assert backend.zygote is None  # and no new zygote: it would fail the same way
            return state, backend.zygote_state(), missing
        finally:
            await backend.close()

    state, later, missing = asyncio.run(scenario())
    assert state == later == "failed"
    assert missing["torch"] == "KeyError: 'getpwuid(): uid not found: 10001'"
    log = (tmp_path / "state" / "logs" / "zygote.log").read_text()
    assert "forking is unsafe: a failed import left torch" in log


def test_the_cluster_view_and_status_show_an_unfit_zygote_and_what_it_could_not_import(
        make_platform, tmp_path, monkeypatch):
    cli_env = {**os.environ}  # the CLI's own imports are not the functions'
    half_importing(tmp_path / "shadow", monkeypatch)
    platform = make_platform()
    with platform.client() as client:
        client.deploy(fn("probe", handler="forked:probe", cpu=2, memory_mb=1024))
        view = wait_for(lambda: (v := client.cluster())["zygote"] != "importing" and v,
                        timeout_s=120, what="the zygote's imports")
        out = client.invoke("probe")
    status = subprocess.run(
        [sys.executable, "-m", "faasrl", "status"], capture_output=True, text=True, timeout=60,
        env={**cli_env, "FAASRL_URL": platform.url, "FAASRL_TOKEN": platform.token or "",
             "COLUMNS": "200"})
    assert view["zygote"] == "failed"
    assert view["zygote_not_preloaded"]["torch"].startswith("KeyError")
    assert out["status"] == "success" and out["result"]["ppid"] == os.getpid(), out
    assert "zygote failed  (not preloaded: torch, " in status.stdout, status


def test_a_missing_library_leaves_the_zygote_ready_and_is_listed(tmp_path, monkeypatch):
    """A module that is not there fails the same in a fork as in a new interpreter: the zygote
    still forks, and says what it lacks."""
    folder = tmp_path / "shadow"
    (folder / "gymnasium").mkdir(parents=True)
    (folder / "gymnasium" / "__init__.py").write_text("import no_such_module_here\n")
    monkeypatch.setenv("PYTHONPATH", with_python_path(folder))

    async def scenario():
        backend = zygote_backend(tmp_path / "state")
        try:
            _, client = await started(backend, "c1")
            out = await run(client)
            client.close()
            return out, backend.zygote.pid, backend.zygote_state(), \
                backend.zygote_not_preloaded()
        finally:
            await backend.close()

    out, zygote, state, missing = asyncio.run(scenario())
    assert state == "ready" and out["ppid"] == zygote
    assert missing["gymnasium"] == "ModuleNotFoundError: No module named 'no_such_module_here'"


def _python_for(uid: int) -> str | None:
    python = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if python is None:
        return None
    probe = subprocess.run([python, "-c", f"import os; os.listdir({str(TEST_FUNCTIONS)!r})"],
                           user=uid, group=uid, extra_groups=[], capture_output=True, cwd="/")
    return python if probe.returncode == 0 else None


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root gateway changes the functions' user")
@pytest.mark.parametrize("zygote", [True, False], ids=["forked", "new-interpreter"])
def test_a_root_gateways_functions_run_as_the_function_user(tmp_path, zygote):
    """As uid 10001, which has no passwd entry on a plain host: its functions still have a user
    name and a home of their own (``getpass.getuser()`` fails without ``USER``/``LOGNAME``)."""
    python = _python_for(10001)  # our interpreter may live where uid 10001 cannot go
    if python is None:
        pytest.skip("no Python here that uid 10001 can run on the test functions")
    try:
        name = pwd.getpwuid(10001).pw_name
    except KeyError:
        name = FUNCTION_USER_NAME  # the runtime image's user, as a Docker container has
    state = tmp_path / "state"

    async def scenario():
        backend = (zygote_backend(state, user="10001:10001", python=Path(python)) if zygote
                   else ProcessBackend(state, user="10001:10001", python=Path(python)))
        assert backend.credentials == (10001, 10001)
        try:
            _, client = await started(backend, "c1", PROBE.model_copy(update={"memory_mb": 512}))
            out = await run(client)
            client.close()
            assert Path(out["tmp"]).stat().st_uid == 10001  # its HOME is its own
            return out, record(state, "c1"), backend.zygote.pid if zygote else os.getpid()
        finally:
            await backend.close()

    out, rec, parent = asyncio.run(scenario())
    assert out["ppid"] == parent and rec["zygote"] == (parent if zygote else None)
    assert (out["uid"], out["gid"], out["groups"]) == (10001, 10001, [])
    assert out["user"] == out["env"]["USER"] == out["env"]["LOGNAME"] == name
    assert out["home"] == out["env"]["HOME"] == out["tmp"]
