"""Per-job Prometheus gauges on the gateway's real /metrics while a job runs, gone once it ends."""

from __future__ import annotations

import httpx
import pytest
from helpers import finished, wait_for
from prometheus_client.parser import text_string_to_metric_families

from faasrl.client import Client

JOB = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
       "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 0,
       "stop": {"max_rounds": 400}}
PLATFORM = {"register_builtins": True}


def job_samples(url: str) -> dict[str, dict[str, float]]:
    """``faasrl_job_*`` samples of one scrape: metric name -> job id -> value."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for s in family.samples:
            if s.name.startswith("faasrl_job_"):
                out.setdefault(s.name, {})[s.labels["job"]] = s.value
    return out


def test_a_running_jobs_gauges_match_its_rows_and_leave_when_it_ends(client: Client, platform):
    job_id = client.submit(JOB)["id"]
    scrape = wait_for(lambda: (s := job_samples(platform.url))
                      and s.get("faasrl_job_round", {}).get(job_id, 0) >= 2 and s,
                      timeout_s=120, what="the job's second round on /metrics", poll_s=0.2)
    info = text_string_to_metric_families(httpx.get(f"{platform.url}/metrics").text)
    labels = next(s.labels for f in info for s in f.samples if s.name == "faasrl_job_info")
    assert labels == {"job": job_id, "algorithm": "ppo", "env_id": "CartPole-v1",
                      "controller": "fixed"}
    rounds = int(scrape["faasrl_job_round"][job_id])
    rows = client.job_metrics(job_id)  # rows never change once written: compare to row k-1
    last = rows[rounds - 1]
    assert scrape["faasrl_job_env_steps"][job_id] == last["total_env_steps"] == rounds * 128
    assert scrape["faasrl_job_cost_usd"][job_id] == pytest.approx(last["cost_total"])
    assert scrape["faasrl_job_env_restarts"][job_id] == sum(r["env_restarts"]
                                                           for r in rows[:rounds])
    assert scrape["faasrl_job_return"][job_id] == pytest.approx(last["recent_mean_return"])

    client.cancel_job(job_id)
    assert finished(client, job_id)["status"] == "cancelled"
    after = job_samples(platform.url)
    assert all(job_id not in by_job for by_job in after.values()), after
