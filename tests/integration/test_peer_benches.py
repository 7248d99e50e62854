"""The peer benchmarks' --quick modes, as CI's smoke check of the comparisons against
Stable-Baselines3 on MuJoCo (bench/mujoco_peers.py) and Atari (bench/atari_peers.py,
bench/dqn_pong_split.py): their figures are not checked here (speed targets live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

pytest.importorskip("stable_baselines3", reason="the bench extra, which make test installs")


def torch_has_cuda() -> bool:
    import torch  # after the skip: the bench extra brings SB3, torch is the platform's

    return torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.parametrize(("script", "task_name", "sides"), [
    # RLlib's side runs in make test's .venv-rllib
    (["bench/mujoco_peers.py", "--tasks", "ppo-halfcheetah", "--rllib"], "ppo-halfcheetah",
     ("faasrl", "sb3", "rllib")),
    (["bench/atari_peers.py"], "ppo-pong", ("faasrl", "sb3")),  # its learner lent the cores
    (["bench/atari_peers.py", "--algorithm", "dqn"], "dqn-pong", ("faasrl", "sb3")),
])
def test_a_peer_benchmarks_quick_mode_runs_every_side_to_its_cap(tmp_path, script, task_name,
                                                                 sides):
    """faasrl's job and each peer's zoo-configured model take the quick cap of env steps
    (nobody reaches the target in it) and are evaluated on held-out episodes."""
    out = tmp_path / "peers.json"
    bench = subprocess.run([sys.executable, *script, "--quick", "--out", str(out)], cwd=REPO,
                           timeout=600, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr[-4000:]
    task = json.loads(out.read_text())[task_name]
    cap = task["summary"]["env_step_cap"]
    assert set(task["runs"]) == set(sides)
    for side in sides:
        (run,) = task["runs"][side]
        assert run["env_steps"] >= cap and not run["reached"], run
        assert run["eval_mean"] is not None, run


@pytest.mark.slow
def test_the_dqn_pong_split_accounts_each_sides_parts_in_both_phases(tmp_path):
    """Every faasrl process (actors, buffer, learner, Redis, the platform) and SB3's collect
    and train are counted in the warm-up and while learning, and both sides trained."""
    out = tmp_path / "split.json"
    bench = subprocess.run([sys.executable, "bench/dqn_pong_split.py", "--quick", "--out",
                            str(out)], cwd=REPO, timeout=600, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr[-4000:]
    result = json.loads(out.read_text())
    for side in ("faasrl", "faasrl, own core"):
        learning = result[side]["learning"]
        assert {"actor", "buffer-8g", "learner", "redis", "platform"} <= set(learning["cpu_s"])
        assert learning["env_steps"] > 0 and learning["gradient_steps"] > 0, learning
        assert result[side]["warm_up"]["cpu_s"]["actor"] > 0
    assert result["faasrl, own core"]["learner_cores"] == 1.0
    sb3 = result["SB3"]["learning"]
    assert sb3["cpu_s"]["train"] > 0 and sb3["cpu_s"]["collect"] > 0 and sb3["gradient_steps"]


@pytest.mark.skipif(torch_has_cuda(), reason="CUDA here: tests/gpu runs --gpu")
def test_the_pong_benchmark_refuses_gpu_where_torch_has_no_cuda():
    """``--gpu`` on a machine without CUDA says so at once, rather than submitting a job whose
    GPU learner could never be placed."""
    bench = subprocess.run([sys.executable, "bench/atari_peers.py", "--gpu", "--quick"],
                           cwd=REPO, timeout=120, capture_output=True, text=True)
    assert bench.returncode == 2 and "--gpu: torch finds no CUDA device" in bench.stderr, \
        bench.stderr[-2000:]
