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


def _learner_cores(make_platform, algorithm: str, node_cpu: int) -> dict:
    """Each row's ``learner_cores`` of a 3-round, 2-actor job lending its actors' cores (True)
    and of one on CartPole's default (None: its own core only), on one platform."""
    platform = make_platform(register_builtins=True, node_cpu=node_cpu)
    with platform.client() as client:
        cores = {}
        for lend in (True, None):
            job = client.submit(tiny_job(algorithm, rounds=3, lend_actor_cores=lend,
                                         controller={"name": "fixed", "actors": 2}))
            succeeded(client, job["id"], timeout_s=240)
            cores[lend] = [r[LEARNER_CORES] for r in client.job_metrics(job["id"])]
    return cores


def test_a_synchronous_jobs_learner_runs_with_its_idle_actors_cores(make_platform):
    cores = _learner_cores(make_platform, "ppo", node_cpu=4)
    # its own core and the two actors' (round 0's learner may start cold, with its own only)
    assert cores[True][1:] == [3.0, 3.0]
    assert cores[None] == [1.0, 1.0, 1.0]


def test_an_off_policy_jobs_learner_runs_with_its_actors_cores_where_they_are_free(
        make_platform):
    # 8 cores: the actors, the buffer and the learner's own leave the two actors' cores free
    cores = _learner_cores(make_platform, "dqn", node_cpu=8)
    # each call gets its own core and those of the actors' free as it starts (none while
    # another invocation waits): a row's figure is its calls' mean
    assert all(1.0 <= c <= 3.0 for c in cores[True]) and max(cores[True]) > 1.0, cores
    assert cores[None] == [1.0, 1.0, 1.0]
