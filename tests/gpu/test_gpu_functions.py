"""GPU learners, checked on a real GPU through the process backend: every algorithm's learner
with ``gpu: 1`` runs on CUDA, functions run as an unprivileged user, fractional GPUs share one
device held to their memory fraction, and an idle GPU container frees its GPU for the next GPU
function. Skipped, saying why, where NVML finds no GPU (``bench/gpu_checks.sh`` runs them on a
GPU machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TINY_JOBS, runs_as, succeeded, tiny_job, wait_for
from helpers import gpu_probe as probe

from faasrl.client import Client
from faasrl.manifest import load_manifest
from faasrl.resources import discover_gpus
from faasrl.round_row import LEARNER_DEVICE

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not discover_gpus(), reason="no GPU found by NVML here")]

FUNCTION_UID = 10001  # a root gateway's functions' user (Settings.function_user's default)
# Functions here run as the gateway's own user (the test of the unprivileged one aside), so the
# other tests do not depend on who can read the checkout.
AS_GATEWAY = {"function_user": ""}


def gpu_learner() -> dict[str, Any]:
    """The built-in learner's manifest, as shipped, with a GPU."""
    spec = load_manifest(REPO / "functions" / "learner")
    return spec.model_copy(update={"name": "learner-gpu", "gpu": 1}).model_dump(
        mode="json", exclude_defaults=True)


@pytest.mark.parametrize("algorithm", sorted(TINY_JOBS))
def test_a_learner_given_a_gpu_runs_on_cuda(make_platform, algorithm: str):
    platform = make_platform(register_builtins=True, **AS_GATEWAY)
    with platform.client() as client:
        client.deploy(gpu_learner())
        # gymnasium: the GPU machine gets no envpool (its asset wheels are too large to carry)
        job = client.submit(tiny_job(algorithm, learner_function="learner-gpu",
                                     env_backend="gymnasium"))
        succeeded(client, job["id"], timeout_s=120)
        rows = client.job_metrics(job["id"])
    assert [r[LEARNER_DEVICE] for r in rows] == ["cuda", "cuda"], rows


def test_functions_run_as_an_unprivileged_user_and_see_the_gpu(make_platform):
    if os.geteuid() != 0:
        pytest.skip("only a root gateway runs functions as another user")
    python = sys.executable
    if not runs_as(FUNCTION_UID, python, "-c", "import torch"):
        pytest.skip(f"uid {FUNCTION_UID} cannot run {python} with torch (PYTHONPATH="
                    f"{os.environ.get('PYTHONPATH')}): make both readable to it")
    if not runs_as(FUNCTION_UID, python, "-c", f"import os; os.listdir({str(REPO)!r})"):
        pytest.skip(f"uid {FUNCTION_UID} cannot read the checkout {REPO}")
    state = Path(tempfile.mkdtemp(prefix="faasrl-gpu-"))
    state.chmod(0o755)
    try:
        platform = make_platform(state_dir=state)
        with platform.client() as client:
            client.deploy(probe("seen", 1))
            rec = client.invoke("seen", {})
    finally:
        shutil.rmtree(state, ignore_errors=True)
    assert rec["status"] == "success", rec
    assert (rec["result"]["uid"], rec["result"]["cuda"]) == (FUNCTION_UID, True), rec["result"]


def test_quarter_gpus_share_one_device_each_held_to_its_fraction(make_platform):
    platform = make_platform(node_gpus=1, **AS_GATEWAY)
    with platform.client() as client:
        client.deploy(probe("quarter", 0.25))
        client.invoke("quarter", {})  # one container up before the crowd: CUDA's first init
        with ThreadPoolExecutor(5) as pool:
            recs = list(pool.map(lambda _: client.invoke("quarter", {"hold_s": 8}), range(5)))
        assert all(r["status"] == "success" for r in recs), recs
        out = [r["result"] for r in recs]
        # Four containers at once on the one device; the fifth invocation waited for one of
        # them (a fifth quarter does not fit its free fraction, 0).
        assert len({o["container"] for o in out}) == 4, out
        assert len({o["device"] for o in out}) == 1 and {o["fraction"] for o in out} == {"0.25"}
        first_end = min(o["ended"] for o in out)
        late = [o for o in out if o["started"] >= first_end - 0.5]
        assert len(late) == 1, out
        # Held to its quarter: half of it fits, a third of the device does not (while the
        # device itself has room for it: the others hold contexts, not memory).
        within = client.invoke("quarter", {"allocate": 0.125})["result"]
        beyond = client.invoke("quarter", {"allocate": 0.33})["result"]
    assert (within["allocated"], beyond["allocated"]) == ("allocated", "oom"), (within, beyond)


def test_an_idle_gpu_container_frees_the_gpu_for_the_next_gpu_function(make_platform):
    platform = make_platform(node_gpus=1, **AS_GATEWAY)
    with platform.client() as client:
        client.deploy(probe("a", 1, keep_alive_s=1))
        client.deploy(probe("b", 1, keep_alive_s=600))
        first = client.invoke("a", {})
        # A's container retires after its keep-alive, and gives the GPU back ...
        wait_for(lambda: not containers(client, "a"), timeout_s=30, what="a's container gone")
        then = client.invoke("b", {})
        assert containers(client, "b")[0]["gpus"] == [0]
        # ... and an idle one is evicted at once for another GPU function that waits for it.
        again = client.invoke("a", {})
        assert not containers(client, "b")
    assert all(r["status"] == "success" and r["result"]["cuda"] for r in (first, then, again))


def containers(client: Client, function: str) -> list[dict[str, Any]]:
    return client.cluster()["functions"].get(function, {}).get("containers", [])


def test_the_pong_benchmark_runs_both_updates_on_the_gpu(tmp_path):
    """``bench/atari_peers.py --gpu --quick``: faasrl's job with its learner deployed at
    ``gpu: 1`` and SB3's model on cuda each reach the quick cap and are evaluated
    (``bench/gpu_pong.sh`` runs the full comparison)."""
    pytest.importorskip("stable_baselines3", reason="bench/gpu_wheels.txt brings it")
    out = tmp_path / "pong.json"
    bench = subprocess.run([sys.executable, "bench/atari_peers.py", "--gpu", "--quick",
                            "--out", str(out)], cwd=REPO, timeout=600, capture_output=True,
                           text=True)
    assert bench.returncode == 0, bench.stderr[-4000:]
    pong = json.loads(out.read_text())["ppo-pong"]
    for side in ("faasrl", "sb3"):
        (run,) = pong["runs"][side]
        assert run["env_steps"] >= pong["summary"]["env_step_cap"], run
