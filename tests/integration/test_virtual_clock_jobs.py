"""Jobs on a virtual clock: asynchronous and off-policy ones replayable, synchronous ones
timed on the modeled cluster, and every workflow's spec checked for its roles' calibration."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import cli_output, finished
from typer.testing import CliRunner

from faasrl.cli import app
from faasrl.client import Client, GatewayError
from faasrl.jobs.clock import replay_differences
from faasrl.jobs.cost import Pricing, lambda_cost, vm_share_cost

PLATFORM = {"register_builtins": True}
# Constant virtual durations (b = 0), so that a round's virtual time can be counted from its row.
CALIBRATION = {"actor": {"a": 1.0}, "learner": {"a": 2.0}, "parameter": {"a": 0.5},
               "buffer": {"a": 0.25}}
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


# A DQN job as test_offpolicy_jobs.py runs it, shorter: 4 actors on 4 virtual cores, a low
# replay ratio, so that the actors run well ahead of the learner and the learner's calls
# overlap theirs.
DQN = {"env_id": "CartPole-v1", "algorithm": "dqn", "execution": "offpolicy",
       "controller": {"name": "fixed", "actors": 4}, "envs_per_actor": 1,
       "steps_per_actor": 32, "evaluation_episodes": 0,
       "hyperparameters": {"learning_starts": 64, "steps_per_round": 8, "publish_every": 4,
                           "batch_size": 16, "memory_size": 2048, "updates_per_step": 0.025},
       "stop": {"max_rounds": 3}, "clock": "virtual",
       "virtual": {"cores": 4, "calibration": {
           "actor": {"a": 1.0, "sd": 0.3}, "learner": {"a": 0.5, "sd": 0.1},
           "buffer": {"a": 0.005, "b": 0.0001, "sd": 0.3}}}}


def test_two_runs_of_a_virtual_clock_dqn_job_give_identical_rows(client: Client):
    """Off-policy: actors explore with the version current at their virtual start and the
    buffer and learner take what the virtual order gave them, so a replay learns the same."""
    first, second = rows_of(client, DQN), rows_of(client, DQN)
    assert len(first) == len(second) == 3
    assert replay_differences(first, second) == []
    assert all(row["virtual_s"] > 0 for row in first)
    assert [row["learner_steps"] for row in first] == [8, 16, 24]
    assert all(row["loss"] is not None for row in first)


# The same job with actors far ahead of a slow learner: a ratio gate so loose that 8 actors of
# 0.5 s keep starting while a learner of 3 s runs, where the newest version in Redis is often
# one that the learner has really published but not yet virtually.
LOOSE = {**DQN, "controller": {"name": "fixed", "actors": 8}, "stop": {"max_rounds": 2},
         "hyperparameters": {**DQN["hyperparameters"], "memory_size": 4096,
                             "updates_per_step": 0.005},
         "virtual": {"cores": 16, "calibration": {
             "actor": {"a": 0.5, "sd": 0.3}, "learner": {"a": 3.0, "sd": 0.1},
             "buffer": {"a": 0.005, "b": 0.0001, "sd": 0.3}}}}


def test_off_policy_actors_that_start_while_a_learner_runs_explore_the_pinned_version(
        client: Client):
    """The replay holds where the pin matters: actors started while a learner ran read the
    version current at their virtual start, older than the one already in Redis for most of
    them (checked, so that this test cannot pass on a configuration that never needs the
    pin)."""
    job = client.submit(LOOSE)["id"]
    assert finished(client, job, timeout_s=300)["status"] == "succeeded"
    assert replay_differences(client.job_metrics(job), rows_of(client, LOOSE)) == []

    def calls(function: str) -> list[dict[str, Any]]:
        return [r for r in client.invocations(function=function, limit=1000)
                if r["job"] == job and r["status"] == "success"
                and "version" in (r["result"] or {})]
    published = [(r["finished_at"], r["result"]["version"]) for r in calls("learner")]
    actors = calls("actor")
    behind = [a for a in actors if a["result"]["version"] < max(
        (v for t, v in published if t < a["requested_at"]), default=0)]
    assert len(behind) >= 0.2 * len(actors), (len(behind), len(actors))


SYNC = {"env_id": "CartPole-v1", "execution": "sync", "envs_per_actor": 2,
        "steps_per_actor": 32, "controller": {"name": "fixed", "actors": 4},
        "evaluation_episodes": 0, "stop": {"max_rounds": 2}, "clock": "virtual"}


@pytest.mark.parametrize(("cores", "round_s"), [(1, 4 * 1.0 + 2.0), (2, 2 * 1.0 + 2.0),
                                                 (8, 1.0 + 2.0)])
def test_a_sync_round_takes_its_actors_list_scheduled_on_the_cores_then_its_learner(
        client: Client, cores: int, round_s: float):
    """Four actors of 1 s and a learner of 2 s: on one core the actors run one after another,
    on two in pairs, on eight all at once; the learner follows the last."""
    rows = rows_of(client, {**SYNC, "virtual": {"cores": cores, "calibration": CALIBRATION}})
    assert [row["virtual_s"] for row in rows] == pytest.approx([round_s] * 2)
    # Billed at their virtual durations, whatever the cores: 4 actor-seconds, 2 learner-seconds.
    memory_mb = client.invocations(function="actor", limit=1)[0]["memory_mb"]
    billed = lambda_cost(4 * 1.0, memory_mb, 4, Pricing()) + vm_share_cost(2.0, Pricing())
    assert [row["virtual_cost_round"] for row in rows] == pytest.approx([billed] * 2)
    # What a controller on the virtual clock reads in place of the host's figures.
    assert [row[c] for row in rows for c in ("virtual_actor_s_mean", "virtual_learner_s")] == \
        pytest.approx([1.0, 2.0] * 2)
    actors = lambda_cost(4 * 1.0, memory_mb, 4, Pricing())
    assert [row["virtual_cost_actors"] for row in rows] == pytest.approx([actors] * 2)


@pytest.mark.parametrize(("stop", "said"), [
    ({"max_wall_s": 7.0}, "max_wall_s (7) reached on the virtual clock"),
    ({"budget_usd": "budget"}, "spent on the virtual clock")])
def test_a_virtual_clock_job_stops_on_the_modeled_clusters_time_and_cost(
        client: Client, stop: dict[str, Any], said: str):
    """Rounds of 3 virtual seconds on 8 cores: a 7 s cap ends the job after its third round,
    as a budget of 2.5 rounds' virtual cost does, however long the host took."""
    if stop.get("budget_usd") == "budget":
        rows_of(client, {**SYNC, "virtual": {"cores": 8, "calibration": CALIBRATION},
                         "stop": {"max_rounds": 1}})  # the actor's memory, to price a round
        memory_mb = client.invocations(function="actor", limit=1)[0]["memory_mb"]
        billed = lambda_cost(4 * 1.0, memory_mb, 4, Pricing()) + vm_share_cost(2.0, Pricing())
        stop = {"budget_usd": 2.5 * billed}
    job = client.submit({**SYNC, "virtual": {"cores": 8, "calibration": CALIBRATION},
                         "stop": {"max_rounds": 10, **stop}})
    done = finished(client, job["id"], timeout_s=300)
    assert done["status"] == "succeeded" and done["round"] == 3, done
    assert said in done["stop_reason"], done["stop_reason"]


@pytest.mark.parametrize(("spec", "calibration", "said"), [
    (SPEC, None, "required with clock: virtual"),
    (DQN, {"actor": {"a": 1.0}, "learner": {"a": 1.0}}, "calibration lacks buffer"),
    (SYNC, {"actor": {"a": 1.0}}, "calibration lacks learner"),
    (SPEC, {"actor": {"a": 1.0}, "learner": {"a": 1.0}, "buffer": {"a": 1.0}},
     "calibration lacks parameter")], ids=["no-cluster", "offpolicy", "sync", "async"])
def test_a_virtual_clock_job_without_its_calibration_is_refused_naming_the_field(
        client: Client, spec: dict[str, Any], calibration: dict[str, Any] | None, said: str):
    """Each workflow needs the calibration of the roles it invokes, and only those."""
    virtual = None if calibration is None else {"cores": 4, "calibration": calibration}
    with pytest.raises(GatewayError) as caught:
        client.submit({**spec, "virtual": virtual})
    assert caught.value.status == 422 and "virtual" in caught.value.fields, caught.value
    assert said in caught.value.fields["virtual"], caught.value.fields


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
