"""Jobs that contend for a full node share it fairly, by priority, not by arrival."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import finished, wait_for

from faasrl.client import Client

LEARNER_MB, ACTOR_MB = 4096, 2048  # the built-in functions' manifests
# Two learners and two actor containers fill the node's memory (its cores never bind): each
# job's round wants four actor invocations, so the jobs' actors wait for the same two.
FULL_NODE = {"register_builtins": True, "node_memory_mb": 2 * LEARNER_MB + 2 * ACTOR_MB,
             "node_cpu": 8}
# Rounds where the actors take most of the time (one light learner pass), so that each job
# could use the two actor containers by itself most of the time.
SPEC = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 256,
        "controller": {"name": "fixed", "actors": 4}, "evaluation_episodes": 0,
        "hyperparameters": {"update_epochs": 1, "num_minibatches": 1},
        # no round cap (500 by default): a fast machine ran 500 rounds inside the window
        "stop": {"max_wall_s": 600, "max_rounds": None}}
EIGHT = {"name": "fixed", "actors": 8}
GAP_S, WINDOW_S = 10.0, 60.0
NODE_MB = FULL_NODE["node_memory_mb"]


def usage(client: Client, job_id: str, start: float, end: float) -> tuple[float, float]:
    """The job's actor-seconds, and its node share-seconds (what the pool's fair share
    equalises: each second an invocation runs, weighted by its container's dominant share of
    the node, here its memory), in the rounds that ended between ``start`` and ``end``."""
    began = client.job(job_id)["started_at"]
    rows = [row for row in client.job_metrics(job_id) if start < began + row["wall_s"] <= end]
    actor_s = sum(row["actor_s"] for row in rows)
    learner_s = sum(row["learner_s"] for row in rows)
    return actor_s, (actor_s * ACTOR_MB + learner_s * LEARNER_MB) / NODE_MB


def contend(client: Client, first: dict[str, Any], second: dict[str, Any]
            ) -> tuple[tuple[float, float], tuple[float, float]]:
    """Submit ``first``, then ``second`` GAP_S later; the ``usage`` of each over the WINDOW_S
    after the second's submission."""
    a = client.submit(first)["id"]
    time.sleep(GAP_S)
    b = client.submit(second)["id"]
    t0 = time.time()
    try:
        time.sleep(WINDOW_S)
    finally:
        for job_id in (a, b):
            client.cancel_job(job_id)
    for job_id in (a, b):
        finished(client, job_id)
        wait_for(lambda j=job_id: client.job_metrics(j), what=f"{job_id}'s rows")
    return usage(client, a, t0, t0 + WINDOW_S), usage(client, b, t0, t0 + WINDOW_S)


@pytest.mark.timeout(150)
def test_two_jobs_of_equal_priority_get_equal_shares_of_a_full_node(make_platform):
    """The second job comes 10 s later, when the first holds the node, and asks for half
    the actors per round: over the minute after, each gets the same node share-seconds within
    25 % (first come, first served gives the first about twice as many actor-seconds: it queues
    twice as many invocations). Share-seconds, not actor-seconds, are what the pool equalises:
    the second job runs its learner twice as often, and a learner holds twice an actor's share
    of the node (actor-seconds alone came out 0.78 to 0.95 of the first's). Three runs on an
    idle 2-core machine gave share-second ratios of 0.81, 0.91 and 1.18: a minute of rounds
    spreads that much, so 20 % failed now and then."""
    platform = make_platform(**FULL_NODE)
    with platform.client() as client:
        (first_actor, first), (second_actor, second) = contend(
            client, {**SPEC, "seed": 1, "controller": EIGHT}, {**SPEC, "seed": 2})
    print(f"over {WINDOW_S:g} s: actor-seconds first {first_actor:.1f}, second "
          f"{second_actor:.1f}, ratio {second_actor / first_actor:.2f}; share-seconds first "
          f"{first:.1f}, second {second:.1f}, ratio {second / first:.2f}")
    assert first_actor > 0 and second_actor > 0
    assert abs(second - first) <= 0.25 * max(first, second), (first, second)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_job_of_a_higher_priority_gets_more_than_an_equal_share(make_platform):
    """Two jobs of eight actors per round (each could keep both actor containers busy), the
    second of priority 3: it gets more actor-seconds than the first, where first come, first
    served splits them evenly. (Not three times as many: its weight counts only while both
    wait, and each of its rounds also waits for its own learner.)"""
    platform = make_platform(**FULL_NODE)
    with platform.client() as client:
        (first, _), (second, _) = contend(
            client, {**SPEC, "seed": 1, "controller": EIGHT},
            {**SPEC, "seed": 2, "controller": EIGHT, "priority": 3})
    print(f"actor-seconds over {WINDOW_S:g} s: priority 1 {first:.1f}, priority 3 "
          f"{second:.1f}, ratio {second / first:.2f}")
    assert second > 1.1 * first, (first, second)
