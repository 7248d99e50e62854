"""TensorBoard event files of a job: written by the gateway as rounds end (``tensorboard: true``)
and by ``faasrl jobs export`` from the REST metrics; read back with tensorboard's own reader.
The same command exports the job's model file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import finished
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from faasrl.client import Client
from faasrl.jobs.scalars import row_scalars
from faasrl.jobs.tensorboard import FOLDER
from faasrl.round_row import TOTAL_ENV_STEPS as STEP_COLUMN

SHORT = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
         "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
         "stop": {"max_rounds": 3}, "tensorboard": True}
PLATFORM = {"register_builtins": True}


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag in the folder's event files: its (step, value) points."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_matches_rows(scalars: dict[str, list[tuple[int, float]]], rows: list[dict]) -> None:
    """One tag per numeric column of the rows, one point per row at its env steps."""
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for tag, value in row_scalars(row).items():
            expected.setdefault(tag, []).append((row[STEP_COLUMN], value))
    assert scalars.keys() == expected.keys()
    for tag, points in expected.items():
        assert [s for s, _ in scalars[tag]] == [s for s, _ in points], tag
        assert [v for _, v in scalars[tag]] == pytest.approx([v for _, v in points],
                                                             rel=1e-6), tag


def test_a_job_writes_its_rounds_as_tensorboard_scalars_and_the_cli_exports_them_and_the_model(
        client: Client, platform, tmp_path: Path):
    job = client.submit(SHORT)
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    rows = client.job_metrics(job["id"])
    assert [r[STEP_COLUMN] for r in rows] == [128, 256, 384]
    live = platform.settings.state_dir / "jobs" / job["id"] / FOLDER
    scalars = read_scalars(live)
    # The columns the issue names are there (a nested controller column would be flattened).
    assert {"mean_return", "recent_mean_return", "actors", "cost_total", "loss",
            "round_s"} <= scalars.keys()
    assert_matches_rows(scalars, rows)

    out = tmp_path / "exported"
    cli = subprocess.run(
        [sys.executable, "-m", "faasrl", "--url", platform.url, "--token", platform.token or "",
         "jobs", "export", job["id"], "--tensorboard", str(out), "--model",
         str(tmp_path / "model.safetensors")],
        capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "wrote 3 rounds" in cli.stdout
    assert_matches_rows(read_scalars(out), rows)
    assert (tmp_path / "model.safetensors").read_bytes() == client.model(job["id"])


def test_a_job_without_tensorboard_writes_no_event_files(client: Client, platform):
    job = client.submit({**SHORT, "tensorboard": False, "stop": {"max_rounds": 1}})
    assert finished(client, job["id"])["status"] == "succeeded"
    assert not (platform.settings.state_dir / "jobs" / job["id"] / FOLDER).exists()


def test_export_of_an_unknown_job_or_of_nothing_fails_saying_why(platform, tmp_path: Path):
    base = [sys.executable, "-m", "faasrl", "--url", platform.url, "--token",
            platform.token or "", "jobs", "export", "feedfacecafe"]
    cli = subprocess.run([*base, "--tensorboard", str(tmp_path / "x")], capture_output=True,
                         text=True, timeout=60)
    assert cli.returncode == 1 and "feedfacecafe" in cli.stdout, cli.stdout + cli.stderr
    cli = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2 and "--model" in cli.stderr, cli.stdout + cli.stderr


def test_a_rerun_after_a_lost_round_hides_what_the_earlier_log_held_beyond_its_state(tmp_path):
    """A job restored from an older checkpoint plays rounds again; its new log's start hides
    the earlier log's points past the restored state, so each step has one point."""
    from faasrl.jobs.tensorboard import EventLog

    def row(step: int, value: float) -> dict:
        return {STEP_COLUMN: step, "mean_return": value}

    first = EventLog(tmp_path)
    first.start_after(0, 1.0)
    for i, step in enumerate((100, 200, 300)):
        first.add_row(row(step, float(i)), 2.0 + i)
    first.close()
    time.sleep(1.1)  # event files are named by the second they were opened in
    second = EventLog(tmp_path)
    second.start_after(100, 10.0)  # restored at 100 steps: 200 and 300 are played again
    for step in (200, 300, 400):
        second.add_row(row(step, step / 10), 11.0)
    second.close()
    assert read_scalars(tmp_path)["mean_return"] == [(100, 0.0), (200, 20.0), (300, 30.0),
                                                     (400, 40.0)]
