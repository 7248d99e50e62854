"""bench/mujoco_peers.py's --quick mode, as CI's smoke check of the MuJoCo comparison against
Stable-Baselines3 (its figures are not checked here: speed targets live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

pytest.importorskip("stable_baselines3", reason="the bench extra, which make test installs")


@pytest.mark.slow
def test_the_mujoco_peers_quick_mode_runs_both_sides_to_their_cap(tmp_path):
    """HalfCheetah's task: faasrl's job and SB3's zoo model each take the quick cap of env
    steps (nobody reaches 3,000 in it) and are evaluated on held-out episodes."""
    out = tmp_path / "mujoco.json"
    bench = subprocess.run([sys.executable, "bench/mujoco_peers.py", "--quick", "--tasks",
                            "ppo-halfcheetah", "--out", str(out)],
                           cwd=REPO, timeout=600, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr[-4000:]
    task = json.loads(out.read_text())["ppo-halfcheetah"]
    cap = task["summary"]["env_step_cap"]
    for side in ("faasrl", "sb3"):
        (run,) = task["runs"][side]
        assert run["env_steps"] >= cap and not run["reached"], run
        assert run["eval_mean"] is not None, run
