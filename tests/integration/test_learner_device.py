"""Every algorithm's rows say where its learner ran (tests/gpu checks "cuda" on a GPU), and a
synchronous or off-policy job's with how many cores."""

from __future__ import annotations

import pytest
from helpers import TINY_JOBS, succeeded, tiny_job

from faasrl.client import Client
from faasrl.round_row import LEARNER_CORES, LEARNER_DEVICE

PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions


@pytest.mark.parametrize("algorithm", sorted(TINY_JOBS))
def test_every_row_names_the_learners_device(client: Client, algorithm: str):
    job = client.submit(tiny_job(algorithm))
    succeeded(client, job["id"], timeout_s=240)
    assert [r[LEARNER_DEVICE] for r in client.job_metrics(job["id"])] == ["cpu", "cpu"]


def test_a_synchronous_jobs_learner_runs_with_its_idle_actors_cores(make_platform):
    platform = make_platform(register_builtins=True, node_cpu=4)
    with platform.client() as client:
        rows = {}
        for lend in (True, None):  # None: CartPole's default, its own core only
            job = client.submit(tiny_job("ppo", rounds=3, lend_actor_cores=lend,
                                         controller={"name": "fixed", "actors": 2}))
            succeeded(client, job["id"], timeout_s=240)
            rows[lend] = client.job_metrics(job["id"])
    # its own core and the two actors' (round 0's learner may start cold, with its own only)
    assert [r[LEARNER_CORES] for r in rows[True][1:]] == [3.0, 3.0]
    assert [r[LEARNER_CORES] for r in rows[None]] == [1.0, 1.0, 1.0]


def test_an_off_policy_jobs_learner_runs_with_its_actors_cores_where_they_are_free(
        make_platform):
    # 8 cores: the actors, the buffer and the learner's own leave the two actors' cores free
    platform = make_platform(register_builtins=True, node_cpu=8)
    with platform.client() as client:
        rows = {}
        for lend in (True, None):  # None: CartPole's default, its own core only
            job = client.submit(tiny_job("dqn", rounds=3, lend_actor_cores=lend,
                                         controller={"name": "fixed", "actors": 2}))
            succeeded(client, job["id"], timeout_s=240)
            rows[lend] = client.job_metrics(job["id"])
    # each call gets its own core and the free ones of the two actors' (none while another
    # call waits: the row's figure is its calls' mean)
    lent = [r[LEARNER_CORES] for r in rows[True]]
    assert all(1.0 <= c <= 3.0 for c in lent) and max(lent) > 1.0, lent
    assert [r[LEARNER_CORES] for r in rows[None]] == [1.0, 1.0, 1.0]
