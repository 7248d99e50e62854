"""bench/calibrate.py, and bench/async_controllers.py and bench/controllers.py with
--virtual-cores, in their --quick mode, as CI's smoke check (their figures are not checked:
speed targets live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

from faasrl.jobs.clock import EXECUTION_ROLES


@pytest.mark.slow
def test_a_calibration_measured_quickly_runs_an_async_variant_on_the_virtual_clock(tmp_path):
    calibration, out = tmp_path / "calibration.json", tmp_path / "async.json"
    subprocess.run([sys.executable, "bench/calibrate.py", "--quick", "--out", str(calibration)],
                   cwd=REPO, check=True, timeout=240, capture_output=True)
    fitted = json.loads(calibration.read_text())["calibration"]
    assert set(fitted) == set(EXECUTION_ROLES["async"])
    assert all(c["a"] >= 0 and c["b"] >= 0 and c["a"] + c["b"] > 0 for c in fitted.values())
    subprocess.run([sys.executable, "bench/async_controllers.py", "--quick", "--envs",
                    "CartPole-v1", "--variants", "ppo-sync", "stellaris", "--virtual-cores", "4",
                    "--calibration", str(calibration), "--out", str(out)],
                   cwd=REPO, check=True, timeout=240, capture_output=True)
    runs = {r["variant"]: r for r in json.loads(out.read_text())["runs"]}
    assert runs["stellaris"]["clock"] == "virtual" and runs["ppo-sync"]["clock"] == "real"
    assert runs["stellaris"]["parallel_wall_s"] > 0
    # The equal-time return exists unless no row with a return came by the horizon (a figure
    # of this machine's load: the quick calibration and the real sync run both time it).
    horizon = min(r["parallel_wall_s"] for r in runs.values())
    stellaris = runs["stellaris"]
    assert (stellaris["return_at_equal_time"] is not None) == any(
        t <= horizon * (1 + 1e-9) and y is not None for t, y in stellaris["parallel_curve"])


@pytest.mark.slow
def test_the_controllers_bench_times_and_bills_its_jobs_on_the_virtual_clock(tmp_path):
    out = tmp_path / "controllers.json"
    subprocess.run([sys.executable, "bench/controllers.py", "--quick", "--controllers", "fixed",
                    "nitro", "--virtual-cores", "16", "--calibration",
                    "bench/calibrations/CartPole-v1-16cores.json", "--no-plot", "--out",
                    str(out)], cwd=REPO, check=True, timeout=240, capture_output=True)
    results = json.loads(out.read_text())
    runs = {r["controller"]: r for r in results["runs"]}
    assert set(runs) == {"fixed", "nitro"} and results["virtual"]["cores"] == 16
    for run in runs.values():
        assert run["clock"] == "virtual", run
        assert run["parallel_wall_s"] > 0 and run["parallel_cost_usd"] > 0
        assert run["parallel_curve"][-1][0] == pytest.approx(run["parallel_wall_s"])


@pytest.mark.slow
def test_a_calibration_with_nitro_times_the_learners_hessian(tmp_path):
    """``--controller nitro``: the learner's Hessian is fitted apart from its samples, and a
    job spec takes the calibration with its ``hessian`` term (the arithmetic:
    tests/unit/test_virtual_clock.py)."""
    calibration, out = tmp_path / "calibration.json", tmp_path / "controllers.json"
    subprocess.run([sys.executable, "bench/calibrate.py", "--quick", "--variant", "ppo-sync",
                    "--controller", "nitro", "--out", str(calibration)],
                   cwd=REPO, check=True, timeout=240, capture_output=True)
    measured = json.loads(calibration.read_text())
    assert set(measured["calibration"]) == set(EXECUTION_ROLES["sync"])
    assert measured["hessian_points"] and measured["calibration"]["learner"]["hessian"] > 0
    subprocess.run([sys.executable, "bench/controllers.py", "--quick", "--controllers", "nitro",
                    "--virtual-cores", "4", "--calibration", str(calibration), "--no-plot",
                    "--out", str(out)], cwd=REPO, check=True, timeout=240, capture_output=True)
    run = json.loads(out.read_text())["runs"][0]
    assert run["clock"] == "virtual" and run["parallel_wall_s"] > 0


@pytest.mark.slow
def test_an_off_policy_calibration_fits_the_buffer_and_learner_at_two_sizes(tmp_path):
    """``--variant dqn``: the actor, learner and buffer of an off-policy job, each fitted on
    the two runs' sizes (the second halves the rollout and the batch), so b is measured, not
    left at 0 by points of one size."""
    out = tmp_path / "calibration.json"
    subprocess.run([sys.executable, "bench/calibrate.py", "--quick", "--variant", "dqn",
                    "--out", str(out)], cwd=REPO, check=True, timeout=240, capture_output=True)
    measured = json.loads(out.read_text())
    assert set(measured["calibration"]) == set(EXECUTION_ROLES["offpolicy"])
    for role, points in measured["points"].items():
        assert len({units for units, _ in points}) >= 2, role
    assert all(c["a"] + c["b"] > 0 for c in measured["calibration"].values())
