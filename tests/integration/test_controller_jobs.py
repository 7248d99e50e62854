"""Each actor-scaling controller runs a short real CartPole job: real actor and learner
processes, real Redis; the rows carry what the controller decided from."""

from __future__ import annotations

import itertools

import httpx
import pytest
from helpers import succeeded

from faasrl.client import Client
from faasrl.controllers.saved_schedulers import save_scheduler
from faasrl.scheduler_training.train import new_scheduler, to_numpy

SHORT = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
         "evaluation_episodes": 0, "stop": {"max_rounds": 3}}
PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions


def run(client: Client, controller: dict, **stop) -> tuple[dict, list[dict]]:
    job = client.submit({**SHORT, "controller": controller,
                         "stop": {**SHORT["stop"], **stop}})
    done = succeeded(client, job["id"])
    rows = client.job_metrics(job["id"])
    assert len(rows) == 3
    for row in rows:
        assert row["policy_kl"] > 0  # every round's update moved the policy
        assert row["actor_cold_starts"] <= row["actors"]
    for prev, row in itertools.pairwise(rows):
        assert prev["prewarm_forecast"] >= row["actors"]  # the pre-warm covered the next round
    return done, rows


def test_nitro_boosts_from_the_hessian_ratio(client: Client):
    _, rows = run(client, {"name": "nitro", "min_actors": 1, "max_actors": 3,
                           "hessian_samples": 64, "hessian_iterations": 8})
    assert rows[0]["actors"] == 3  # empty window: S = 1
    for row in rows:
        assert row["hessian_lambda_min"] is not None and row["hessian_s"] > 0
        assert row["hessian_samples"] == 64 and row["hessian_iterations"] <= 8
        assert row["prewarm_forecast"] == 3  # a full boost is always pre-warmed
        assert 1 <= row["actors"] <= 3
    for prev, row in itertools.pairwise(rows):
        assert row["controller"]["ratio"] == prev["hessian_ratio"]  # R of the policy it runs


def test_kungfu_reads_the_gradient_noise_scale(client: Client):
    _, rows = run(client, {"name": "kungfu", "min_actors": 1, "max_actors": 3})
    assert all("gns" in row for row in rows)
    assert [r["actors"] for r in rows] == sorted(r["actors"] for r in rows)  # never down


def test_hydrozoa_doubles_and_its_rounds_are_prewarmed(client: Client):
    _, rows = run(client, {"name": "hydrozoa", "start": 1, "every": 1, "max_actors": 4})
    assert [r["actors"] for r in rows] == [1, 2, 4]
    assert [r["prewarm_forecast"] for r in rows] == [2, 4, 4]  # exact: the next round's count


def test_minions_adapt_and_max(client: Client):
    _, rows = run(client, {"name": "minions-adapt", "max_actors": 3}, target_reward=500)
    assert all(1 <= r["actors"] <= 3 for r in rows)
    _, rows = run(client, {"name": "minions-max", "max_actors": 2})
    assert [r["actors"] for r in rows] == [2, 2, 2]


def test_minions_runs_a_saved_scheduler(client: Client, platform):
    save_scheduler(platform.settings.scheduler_folder, "tiny", to_numpy(new_scheduler(3, 0)),
                   {"i_max": 3})
    _, rows = run(client, {"name": "minions", "scheduler": "tiny", "sample": True})
    for row in rows:
        assert len(row["controller"]["state"]) == 8 and row["controller"]["state"][0] == \
            row["round"]
        assert row["controller"]["action"] == row["actors"]
    assert rows[1]["controller"]["state"][3] == pytest.approx(rows[0]["policy_kl"])


@pytest.mark.parametrize(("body", "field"), [
    ({"controller": {"name": "minions", "scheduler": "missing"}}, "controller.scheduler"),
    ({"controller": {"name": "minions-adapt"}}, "stop.target_reward"),
])
def test_controller_references_are_checked_at_submit(platform, body, field):
    resp = httpx.post(f"{platform.url}/v1/jobs", json={**SHORT, **body})
    assert resp.status_code == 422, resp.text
    assert field in resp.json()["error"]["fields"]
