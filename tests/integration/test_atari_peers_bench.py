"""bench/atari_peers.py's --quick mode, as CI's smoke check of the Pong comparison against
Stable-Baselines3 (its figures are not checked here: speed targets live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

pytest.importorskip("stable_baselines3", reason="the bench extra, which make test installs")


@pytest.mark.slow
def test_the_atari_peers_quick_mode_runs_both_sides_to_their_cap(tmp_path):
    """faasrl's job and SB3's zoo model each take the quick cap of env steps on Pong, play
    the held-out episodes to a Pong score, and report their frames per second."""
    out = tmp_path / "atari.json"
    bench = subprocess.run([sys.executable, "bench/atari_peers.py", "--quick", "--out", str(out)],
                           cwd=REPO, timeout=600, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr[-4000:]
    task = json.loads(out.read_text())["ppo-pong"]
    cap = task["summary"]["env_step_cap"]
    for side in ("faasrl", "sb3"):
        (run,) = task["runs"][side]
        assert run["env_steps"] >= cap and not run["reached"], run
        assert -21 <= run["eval_mean"] < 18, run
        assert task["frames_per_s"][side] > 0
