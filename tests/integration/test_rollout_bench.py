"""bench/rollout_throughput.py's --quick mode, as CI's smoke check of the benchmark (its figures
are not checked here: speed targets live in bench/, not in timed tests)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO


@pytest.mark.slow
def test_rollout_throughput_quick_runs_every_side(tmp_path):
    out = tmp_path / "rollout.json"
    subprocess.run([sys.executable, "bench/rollout_throughput.py", "--quick", "--out", str(out)],
                   cwd=REPO, check=True, timeout=240, capture_output=True)
    results = json.loads(out.read_text())["results"]
    assert {r["env_id"] for r in results} == {"ALE/Pong-v5", "Hopper-v5"}
    for r in results:
        assert set(r["steps_per_s"]) == {"envpool", "gymnasium", "actor", "actor_gymnasium", "job"}
        assert all(rate > 0 for rate in r["steps_per_s"].values()), r
