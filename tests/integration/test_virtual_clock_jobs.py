"""Asynchronous jobs on a virtual clock: replayable, and timed on the modeled cluster."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import finished

from faasrl.client import Client, GatewayError

PLATFORM = {"register_builtins": True}
# Constant virtual durations (b = 0), so that a round's virtual time can be counted from its row.
CALIBRATION = {"actor": {"a": 1.0}, "learner": {"a": 2.0}, "parameter": {"a": 0.5}}
SPEC = {"env_id": "CartPole-v1", "execution": "async", "envs_per_actor": 2,
        "steps_per_actor": 32, "controller": {"name": "fixed", "actors": 4},
        "asynchronous": {"max_learners": 2, "sgd_iters": 2}, "evaluation_episodes": 0,
        "stop": {"max_rounds": 4}, "clock": "virtual",
        "virtual": {"cores": 8, "calibration": CALIBRATION}}
# What depends on the host by nature: wall times, the costs billed from them, the node's share.
WALL = ("round_s", "parallel_round_s", "actor_s", "actor_s_max", "actor_s_mean", "learner_s",
        "parameter_s", "queue_s", "queue_s_max", "transfer_s", "wall_s", "parallel_wall_s",
        "paused_s", "controller_s", "share", "cold_starts", "cost_round", "cost_total",
        "cost_actors", "cost_learner", "cost_parameter", "serverful_cost_total",
        "parallel_cost_round", "parallel_cost_total")


def rows_of(client: Client, spec: dict[str, Any]) -> list[dict[str, Any]]:
    job = client.submit(spec)
    done = finished(client, job["id"], timeout_s=300)
    assert done["status"] == "succeeded", done
    return client.job_metrics(job["id"])


def test_two_runs_of_a_virtual_clock_job_give_identical_rows(client: Client):
    """Same spec, same seeds: every version, staleness, return and loss comes out the same,
    whatever order the real invocations came back in."""
    first, second = rows_of(client, SPEC), rows_of(client, SPEC)
    assert len(first) == len(second) == 4
    for a, b in zip(first, second, strict=True):
        assert {k: v for k, v in a.items() if k not in WALL} == \
            {k: v for k, v in b.items() if k not in WALL}
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
