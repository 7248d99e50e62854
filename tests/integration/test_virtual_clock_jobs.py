"""Asynchronous jobs on a virtual clock: replayable, and timed on the modeled cluster."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import cli_output, finished
from typer.testing import CliRunner

from faasrl.cli import app
from faasrl.client import Client, GatewayError
from faasrl.jobs.clock import replay_differences

PLATFORM = {"register_builtins": True}
# Constant virtual durations (b = 0), so that a round's virtual time can be counted from its row.
CALIBRATION = {"actor": {"a": 1.0}, "learner": {"a": 2.0}, "parameter": {"a": 0.5}}
SPEC = {"env_id": "CartPole-v1", "execution": "async", "envs_per_actor": 2,
        "steps_per_actor": 32, "controller": {"name": "fixed", "actors": 4},
        "asynchronous": {"max_learners": 2, "sgd_iters": 2}, "evaluation_episodes": 0,
        "stop": {"max_rounds": 4}, "clock": "virtual",
        "virtual": {"cores": 8, "calibration": CALIBRATION}}


def rows_of(client: Client, spec: dict[str, Any]) -> list[dict[str, Any]]:
    job = client.submit(spec)
    done = finished(client, job["id"], timeout_s=300)
    assert done["status"] == "succeeded", done
    return client.job_metrics(job["id"])


SPREAD = {role: {**c, "sd": 0.3} for role, c in CALIBRATION.items()}


@pytest.mark.parametrize(("algorithm", "calibration"), [
    ("ppo", CALIBRATION), ("ppo", SPREAD), ("impact", SPREAD)],
    ids=["stellaris-exact", "stellaris-spread", "impact-spread"])
def test_two_runs_of_a_virtual_clock_job_give_identical_rows(client: Client, algorithm,
                                                             calibration):
    """Same spec, same seeds: every version, staleness, return and loss comes out the same,
    whatever order the real invocations came back in (a spread's draws included)."""
    spec = {**SPEC, "algorithm": algorithm,
            "virtual": {"cores": 8, "calibration": calibration}}
    first, second = rows_of(client, spec), rows_of(client, spec)
    assert len(first) == len(second) == 4
    assert replay_differences(first, second) == []
    assert all(row["virtual_s"] > 0 for row in first)
    assert sum(row["episodes"] for row in first) > 0


@pytest.mark.parametrize("cores", [1, 8])
def test_one_virtual_core_runs_every_invocation_one_after_another(client: Client, cores: int):
    """With one core the job's virtual time is the sum of its invocations' durations (up to
    the actors that ended before the last round's end and are counted in no row); with eight
    they overlap."""
    rows = rows_of(client, {**SPEC, "virtual": {"cores": cores, "calibration": CALIBRATION}})
    total = sum(row["virtual_s"] for row in rows)
    counted = sum(CALIBRATION["actor"]["a"] * row["actor_rollouts"]
                  + CALIBRATION["learner"]["a"] * row["learners_invoked"]
                  + CALIBRATION["parameter"]["a"] * row["parameter_invocations"]
                  for row in rows)
    if cores == 1:
        assert counted <= total <= counted + 4 * CALIBRATION["actor"]["a"], (total, counted)
    else:
        assert total < 0.6 * counted, (total, counted)
    assert "virtual_s" in rows[0]


def test_a_virtual_clock_job_without_its_cluster_is_refused_naming_the_field(client: Client):
    with pytest.raises(GatewayError) as caught:
        client.submit({**SPEC, "virtual": None})
    assert caught.value.status == 422 and "virtual" in caught.value.fields, caught.value


def test_faasrl_jobs_replay_reruns_a_job_and_finds_every_row_the_same(platform):
    with platform.client() as client:
        job = client.submit(SPEC)
        assert finished(client, job["id"], timeout_s=300)["status"] == "succeeded"
        out = cli_output(platform.url, "jobs", "replay", job["id"])
        assert "all 4 rows as" in out, out
        real = client.submit({**SPEC, "clock": "real", "virtual": None})
        finished(client, real["id"], timeout_s=300)
    runner = CliRunner().invoke(app, ["jobs", "replay", real["id"]],
                                env={"FAASRL_URL": platform.url, "COLUMNS": "200"})
    assert runner.exit_code == 2 and "cannot be replayed" in runner.output, runner.output


def test_a_replay_names_the_rows_and_columns_that_differ():
    rows = [{"round": 0, "version": 3, "wall_s": 1.0}, {"round": 1, "version": 5, "wall_s": 2.0}]
    replayed = [{"round": 0, "version": 3, "wall_s": 9.0}, {"round": 1, "version": 6}]
    assert replay_differences(rows, replayed) == ["round 1: version 5, replayed 6"]
    assert replay_differences(rows, replayed[:1]) == ["2 rows, replayed 1"]
