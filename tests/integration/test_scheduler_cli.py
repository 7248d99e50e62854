"""``faasrl scheduler train|ls|rm`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from faasrl.cli import app

FAASRL = [sys.executable, "-m", "faasrl"]


def cli(state: Path, *args: str) -> SimpleNamespace:
    """The command in this process (a fresh interpreter spends seconds importing torch)."""
    out = CliRunner().invoke(app, list(args), env={"FAASRL_STATE_DIR": str(state),
                                                    "COLUMNS": "200"})
    return SimpleNamespace(returncode=out.exit_code, stdout=out.output, stderr="")


def test_train_on_the_simulated_workload_then_fine_tune_list_and_delete(tmp_path):
    out = cli(tmp_path, "scheduler", "train", "sim", "--simulated", "--episodes", "6",
              "--i-max", "8")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "saved scheduler sim" in out.stdout
    meta = json.loads((tmp_path / "schedulers" / "sim.json").read_text())
    assert meta["i_max"] == 8 and meta["episodes"] == 6 and meta["trained_on"] == "simulated"
    assert (tmp_path / "schedulers" / "sim.safetensors").exists()

    out = cli(tmp_path, "scheduler", "train", "sim2", "--simulated", "--episodes", "2",
              "--from", "sim")
    assert out.returncode == 0, out.stderr + out.stdout
    meta = json.loads((tmp_path / "schedulers" / "sim2.json").read_text())
    assert meta["base"] == "sim" and meta["i_max"] == 8  # I_max comes from the base

    listing = cli(tmp_path, "scheduler", "ls").stdout
    assert "sim " in listing and "sim2" in listing
    assert cli(tmp_path, "scheduler", "rm", "sim2").returncode == 0
    assert "sim2" not in cli(tmp_path, "scheduler", "ls").stdout


@pytest.mark.parametrize(("args", "message"), [
    (["scheduler", "train", "x", "--episodes", "1"], "--env"),
    (["scheduler", "train", "x", "--simulated", "--from", "nope"], "no scheduler"),
    (["scheduler", "rm", "nope"], "no scheduler"),
])
def test_bad_scheduler_commands_say_why(tmp_path, args, message):
    out = cli(tmp_path, *args)
    assert out.returncode != 0 and message in out.stdout + out.stderr


@pytest.mark.slow
def test_train_on_whole_jobs(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"env_id": "CartPole-v1", "envs_per_actor": 2,
                                "steps_per_actor": 32, "evaluation_episodes": 0}))
    env = {**os.environ, "FAASRL_STATE_DIR": str(tmp_path), "COLUMNS": "200"}
    out = subprocess.run([*FAASRL, "scheduler", "train", "jobs", "--spec", str(spec),
                          "--episodes", "2", "--i-max", "2", "--max-rounds", "2", "--target",
                          "100"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    meta = json.loads((tmp_path / "schedulers" / "jobs.json").read_text())
    assert meta["trained_on"] == "CartPole-v1" and meta["episodes"] == 2
