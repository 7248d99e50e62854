"""Jobs beside each other: each learns as it would alone (only slower), since an actor slot's
envs stay in the container that has them; an env restart that still happens is counted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import REPO, at_round, finished

from faasrl.client import Client
from faasrl.jobs.store import reached_target
from faasrl.user_input import load_yaml

SHORT = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
         "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
         "stop": {"max_rounds": 4}}
LEARNER_MB, ACTOR_MB = 4096, 2048  # the built-in functions' manifests


def _episodes(client: Client, job_id: str) -> list[tuple[int, float | None]]:
    """Per round: how many episodes ended and their mean return (what a lost env changes)."""
    return [(r["episodes"], r["mean_return"]) for r in client.job_metrics(job_id)]


def _run(client: Client, specs: list[dict[str, Any]], timeout_s: float = 180
         ) -> list[dict[str, Any]]:
    """Submit the jobs at once and wait for them all to succeed."""
    ids = [client.submit(spec)["id"] for spec in specs]
    done = [finished(client, job_id, timeout_s=timeout_s) for job_id in ids]
    assert all(d["status"] == "succeeded" for d in done), done
    return done


def test_three_jobs_on_two_actor_containers_learn_as_each_would_alone(make_platform):
    """Six (job, slot)s share two actor containers (memory for three learners and two
    actors): every slot goes back to the container that has its envs, so each job's
    episodes are the ones it has alone, round by round, and no env restarts."""
    platform = make_platform(register_builtins=True,
                             node_memory_mb=3 * LEARNER_MB + 2 * ACTOR_MB)
    seeds = (11, 12, 13)
    with platform.client() as client:
        alone = {seed: _episodes(client, _run(client, [{**SHORT, "seed": seed}])[0]["id"])
                 for seed in seeds}
        together = _run(client, [{**SHORT, "seed": seed} for seed in seeds])
        for seed, job in zip(seeds, together, strict=True):
            assert _episodes(client, job["id"]) == alone[seed], seed
            assert job["env_restarts"] == 0
            assert all(r["env_restarts"] == 0 for r in client.job_metrics(job["id"]))


def test_envs_lost_with_their_container_are_counted_in_the_row(make_platform):
    """A new actor version retires the containers that hold the slots' envs: the next round's
    rollouts start fresh envs, and the row, the record and the CSV say so."""
    platform = make_platform(register_builtins=True)
    with platform.client() as client:
        job = client.submit({**SHORT, "stop": {"max_rounds": 6}})
        at_round(client, job["id"], 2)
        client.deploy(client.function("actor"))  # the same code, a new version
        done = finished(client, job["id"])
        assert done["status"] == "succeeded", done
        rows = client.job_metrics(job["id"])
        assert rows[0]["env_restarts"] == 0  # a slot's first envs are no restart
        assert sum(r["env_restarts"] for r in rows) == done["env_restarts"] == 2  # both slots
        csv = httpx.get(f"{platform.url}/v1/jobs/{job['id']}/metrics?format=csv").text
        assert "env_restarts" in csv.splitlines()[0].split(",")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_four_cartpole_jobs_at_once_reach_the_target_as_soon_as_alone(make_platform):
    """examples/cartpole.yaml, seeds 11-14, first one at a time, then all four at once on the
    same platform: each reaches the target within 1.5x the rounds it took alone (a job's
    rounds are the same as alone when its envs are kept, only slower)."""
    spec = load_yaml((REPO / "examples" / "cartpole.yaml").read_text())
    seeds = (11, 12, 13, 14)
    platform = make_platform(register_builtins=True)
    with platform.client() as client:
        alone = {seed: _run(client, [{**spec, "seed": seed}], timeout_s=300)[0]["round"]
                 for seed in seeds}
        together = _run(client, [{**spec, "seed": seed} for seed in seeds], timeout_s=600)
    for seed, job in zip(seeds, together, strict=True):
        assert reached_target(job["stop_reason"]), (seed, job)
        assert job["round"] <= 1.5 * alone[seed], (seed, job["round"], alone[seed])
