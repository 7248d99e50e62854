"""The function runtime as a real process, spoken to over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from helpers import pid_alive, start_runtime, wait_for

from faasrl.runtime.server import TIMEOUT_EXIT


@pytest.fixture
def runtime() -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = start_runtime("--memory-mb", "256")
    yield proc, url
    proc.kill()
    proc.wait()


def test_health_init_run_and_warm_state(runtime):
    _, url = runtime
    health = httpx.get(f"{url}/healthz").json()
    assert health["status"] == "ok" and health["initialized"] is False
    assert httpx.post(f"{url}/run", json={"args": 1}).status_code == 409  # not initialized
    init = httpx.post(f"{url}/init", json={"handler": "fns:echo", "env": {"A": "1"}})
    assert init.status_code == 200
    again = httpx.post(f"{url}/init", json={"handler": "fns:echo"})
    assert again.status_code == 409
    with httpx.Client(base_url=url) as http:  # one keep-alive connection
        outs = [http.post("/run", json={"args": i, "deadline_s": 5}).json() for i in range(3)]
    assert [o["result"]["calls"] for o in outs] == [1, 2, 3]
    assert httpx.get(f"{url}/healthz").json()["invocations"] == 3


def test_duration_is_the_handler_s_time_in_seconds(runtime):
    _, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:sleep"})
    t0 = time.monotonic()
    out = httpx.post(f"{url}/run", json={"args": {"s": 0.2}}).json()
    assert 0.2 <= out["duration_s"] <= time.monotonic() - t0


def test_cpu_time_is_the_run_for_a_busy_handler_and_none_for_a_sleeping_one(runtime):
    _, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:spin"})
    busy = httpx.post(f"{url}/run", json={"args": {"s": 0.3}}).json()
    # Its thread is on a core or waiting for one (other tests may be busy on this machine). A
    # loaded machine loses some of it to neither (a full suite once: 0.254 of 0.300 s), so the
    # sum is checked to a quarter; test_wait_for_a_core_is_measured_apart_from_the_run checks
    # the split itself.
    assert busy["cpu_s"] + busy["wait_s"] == pytest.approx(busy["duration_s"], rel=0.25), busy
    assert busy["cpu_s"] > 0.2 * busy["duration_s"], busy
    proc, url = start_runtime()
    try:
        httpx.post(f"{url}/init", json={"handler": "fns:sleep"})
        idle = httpx.post(f"{url}/run", json={"args": {"s": 0.3}}).json()
        assert idle["duration_s"] >= 0.3 and idle["cpu_s"] < 0.05, idle
    finally:
        proc.kill()
        proc.wait()


def test_wait_for_a_core_is_measured_apart_from_the_run():
    """A busy handler sharing its one core with a busy-looping neighbour runs about half
    the time: the other half is its thread's wait for the core, and the two add up."""
    def one_core() -> None:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    proc, url = start_runtime(preexec_fn=one_core)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=one_core)
    try:
        httpx.post(f"{url}/init", json={"handler": "fns:spin"})
        out = httpx.post(f"{url}/run", json={"args": {"s": 0.6}}).json()
    finally:
        for p in (proc, hog):
            p.kill()
            p.wait()
    assert 0.25 * out["duration_s"] <= out["wait_s"] <= 0.9 * out["duration_s"], out
    assert out["cpu_s"] + out["wait_s"] == pytest.approx(out["duration_s"], rel=0.15), out


def test_init_errors(runtime):
    _, url = runtime
    bad = httpx.post(f"{url}/init", json={"handler": "fns"})
    assert bad.status_code == 400 and "handler" in bad.json()["error"]["message"]
    missing = httpx.post(f"{url}/init", json={"handler": "nope:main"})
    assert missing.status_code == 500
    assert missing.json()["error"] == {**missing.json()["error"], "type": "InitError"}
    assert "ModuleNotFoundError" in missing.json()["error"]["message"]
    for cwd in (7, "/no/such/folder"):  # a stem cell's function folder
        bad_cwd = httpx.post(f"{url}/init", json={"handler": "fns:echo", "cwd": cwd})
        assert bad_cwd.status_code == 400 and bad_cwd.json()["error"]["message"].startswith(
            "cwd: ")
    for code in ("not base64!", "bm90IGEgemlw", 7):  # the last but one: "not a zip"
        bad_code = httpx.post(f"{url}/init", json={"handler": "fns:echo", "code": code})
        assert bad_code.status_code == 400 and bad_code.json()["error"]["message"].startswith(
            "code: "), bad_code.json()
    for field, value in (("memory_mb", "lots"), ("concurrency", 1.5), ("concurrency", True)):
        bad_int = httpx.post(f"{url}/init", json={"handler": "fns:echo", field: value})
        assert bad_int.status_code == 400 and bad_int.json()["error"]["message"].startswith(
            f"{field}: ")
    assert httpx.post(f"{url}/init", json={"handler": "fns:echo"}).status_code == 200


def test_bad_bodies_are_400(runtime):
    _, url = runtime
    assert httpx.post(f"{url}/init", content=b"{oops").status_code == 400
    assert httpx.post(f"{url}/init", json=[1, 2]).status_code == 400
    httpx.post(f"{url}/init", json={"handler": "fns:echo"})
    assert httpx.post(f"{url}/run", json={"deadline_s": "soon"}).status_code == 400
    assert httpx.get(f"{url}/nope").status_code == 404


def test_a_run_told_its_threads_sizes_torch_to_them_until_told_otherwise(runtime):
    _, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:torch_threads",
                                    "env": {"OMP_NUM_THREADS": "1"}})
    runs = [{"threads": 2}, {}, {"threads": 1}, {"threads": 3}]
    with httpx.Client(base_url=url) as http:  # one connection: its thread reads the threads set
        assert [http.post("/run", json=r).json()["result"] for r in runs] == [2, 2, 1, 3]
    bad = httpx.post(f"{url}/run", json={"threads": "two"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("threads: ")


def test_handler_exception_is_structured(runtime):
    _, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:boom"})
    err = httpx.post(f"{url}/run", json={"args": 3}).json()["error"]
    assert err["type"] == "ValueError" and err["message"] == "bad value: 3"
    assert "raise ValueError" in err["traceback"]


def test_run_past_deadline_answers_timeout_and_exits(runtime):
    proc, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:sleep"})
    t0 = time.monotonic()
    out = httpx.post(f"{url}/run", json={"args": {"s": 30}, "deadline_s": 0.3}).json()
    assert out["error"]["type"] == "Timeout" and time.monotonic() - t0 < 3
    assert proc.wait(5) == TIMEOUT_EXIT


def test_memory_limit_is_a_memory_error(runtime):
    _, url = runtime
    httpx.post(f"{url}/init", json={"handler": "fns:hog"})
    assert httpx.post(f"{url}/run", json={"args": {"mb": 512}}).json()["error"]["type"] \
        == "MemoryError"


def test_runtime_dies_with_its_parent(tmp_path):
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-m", "faasrl.runtime", "--port", "0",
                          "--parent-pid", str(os.getpid())], stdout=subprocess.DEVNULL)
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(60)
"""])
    child_pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(),
                             what="the runtime's pid"))
    wait_for(lambda: pid_alive(child_pid), what="the runtime to start")
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_for(lambda: not pid_alive(child_pid), timeout_s=5, what="the orphan to die")
