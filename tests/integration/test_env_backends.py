"""A job's env backend through REST: EnvPool actors on a real platform, refusals at submit."""

from __future__ import annotations

import httpx
import pytest
from helpers import succeeded

from faasrl.client import Client

PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions
HOPPER = {"env_id": "Hopper-v5", "algorithm": "ppo", "envs_per_actor": 2, "steps_per_actor": 64,
          "controller": {"name": "fixed", "actors": 1}, "evaluation_episodes": 1,
          "hyperparameters": {"update_epochs": 1, "num_minibatches": 1},
          "stop": {"max_rounds": 2}}


def test_hopper_job_runs_envpool_actors_and_rows_say_so(client: Client):
    job = client.submit({**HOPPER, "env_backend": "envpool"})
    assert job["spec"]["env_backend"] == "envpool"
    done = succeeded(client, job["id"])
    assert done["env_steps"] == 2 * 2 * 64
    rows = client.job_metrics(job["id"])
    assert [r["env_backend"] for r in rows] == ["envpool", "envpool"]  # the actors' own word
    # Left out, the backend is resolved at submit, so the record names it.
    assert client.submit({**HOPPER, "stop": {"max_rounds": 1}})["spec"]["env_backend"] == \
        "envpool"


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Hopper-v4"])
def test_envpool_for_an_env_it_cannot_run_is_422_naming_env_backend(platform, env_id):
    resp = httpx.post(f"{platform.url}/v1/jobs", json={"env_id": env_id, "env_backend": "envpool"})
    assert resp.status_code == 422, resp.text
    assert "env_backend" in resp.json()["error"]["fields"], resp.json()
    assert "envpool cannot run" in resp.text
