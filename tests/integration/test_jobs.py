"""Training jobs through REST: real actor and learner processes, real Redis."""

from __future__ import annotations

import itertools
import json
import shutil
import time

import httpx
import pytest
import redis
import safetensors.numpy
from helpers import REPO, finished, fn, wait_for

from faasrl.client import Client, GatewayError
from faasrl.data.keys import job_prefix
from faasrl.jobs.store import reached_target
from faasrl.rl.seeds import evaluation_seeds

SHORT = {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
         "controller": {"name": "fixed", "actors": 2}, "evaluation_episodes": 2,
         "stop": {"max_rounds": 3}}
PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions


def test_short_job_rows_cost_model_and_events(client: Client, platform):
    job = client.submit(SHORT)
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    assert done["stop_reason"] == "max_rounds (3) done"
    assert (done["round"], done["version"], done["env_steps"]) == (3, 3, 3 * 2 * 2 * 32)
    assert done["evaluation"]["episodes"] == 2
    rows = client.job_metrics(job["id"])
    assert [r["round"] for r in rows] == [0, 1, 2]
    # The job's learner invocations, each found by its run time (the row's learner_s).
    learners = {r["run_s"]: r for r in client.invocations("learner", 100)
                if r["requested_at"] >= done["started_at"]}
    for row in rows:
        assert row["actors"] == 2 and row["env_steps"] == 128 and row["samples"] == 128
        assert row["cost_round"] == pytest.approx(row["cost_actors"] + row["cost_learner"])
        assert row["cost_actors"] > 0 and row["cost_learner"] > 0
        assert row["round_s"] >= row["learner_s"] > 0 and row["rejected"] == 0
        # Modeled parallel: the same round without waits for a core, never longer or dearer;
        # only the waits go, so the learner's run on a core of its own (it ends the round)
        # stays in it, however loaded the machine.
        learner = learners[row["learner_s"]]
        alone = learner["run_s"] - (learner["wait_s"] or 0.0)
        assert alone - 1e-3 <= row["parallel_round_s"] <= row["round_s"]
        assert 0 < row["parallel_cost_round"] <= row["cost_round"] * (1 + 1e-9)
    assert sum(r["cold_starts"] for r in rows[1:]) == 0  # containers stay warm between rounds
    assert rows[-1]["cost_total"] == pytest.approx(sum(r["cost_round"] for r in rows))
    assert rows[-1]["cost_total"] == pytest.approx(done["cost_usd"])
    assert done["serverful_cost_usd"] > 0
    saved = sum(r["round_s"] - r["parallel_round_s"] for r in rows)
    assert done["parallel_wall_s"] == pytest.approx(done["wall_s"] - saved, abs=1e-6)
    assert done["parallel_cost_usd"] == pytest.approx(rows[-1]["parallel_cost_total"])

    csv = httpx.get(f"{platform.url}/v1/jobs/{job['id']}/metrics?format=csv").text
    assert csv.splitlines()[0].startswith("round,actors") and len(csv.splitlines()) == 4
    # Every column the rows have is named (GET /v1/jobs/columns) but PPO's own figures, and
    # ?columns=v2 gives the same values under group/name.
    named = {c["name"]: c for c in httpx.get(f"{platform.url}/v1/jobs/columns").json()}
    assert set(rows[0]) - set(named) == {"pg_loss", "v_loss", "entropy", "approx_kl",
                                         "clipfrac", "explained_variance", "lr", "epochs",
                                         "kl_coef"}
    v2 = httpx.get(f"{platform.url}/v1/jobs/{job['id']}/metrics?columns=v2").json()
    assert v2[-1]["cost/cost_total"] == rows[-1]["cost_total"]
    assert v2[-1]["algo/loss"] == rows[-1]["loss"] and v2[-1]["algo/pg_loss"] == rows[-1]["pg_loss"]
    assert v2[-1]["workflow/learner_s"] == rows[-1]["learner_s"] and v2[-1]["round"] == 2
    header = httpx.get(f"{platform.url}/v1/jobs/{job['id']}/metrics?format=csv&columns=v2"
                       ).text.splitlines()[0].split(",")
    assert header[:2] == ["round", "actors"] and "controller/controller" in header
    assert len(header) == len(rows[0])

    weights = safetensors.numpy.load(client.model(job["id"]))
    assert weights and all(v.dtype.kind == "f" for v in weights.values())
    assert safetensors.numpy.load(client.model(job["id"], version=0)).keys() == weights.keys()
    with pytest.raises(GatewayError) as err:
        client.model(job["id"], version=99)
    assert err.value.status == 404

    events = list(client.job_events(job["id"]))
    assert [e for e, _ in events] == ["round"] * 3 + ["end"]
    assert events[-1][1]["status"] == "succeeded"
    assert job["id"] in [j["id"] for j in client.jobs()]


def test_a_job_that_stops_short_of_its_target_says_so(client: Client):
    job = client.submit({**SHORT, "evaluation_episodes": 0,
                         "stop": {"max_rounds": 2, "target_reward": 10_000}})
    done = finished(client, job["id"])
    assert done["status"] == "succeeded"
    mean = done["last_row"]["recent_mean_return"]
    assert done["stop_reason"] == (f"max_rounds (2) done; target reward 10000 not reached "
                                   f"(training mean {mean:.1f})")
    assert not reached_target(done["stop_reason"])


def _evaluate_locally(client: Client, job: dict, seeds: range) -> list[float]:
    """The job's final weights evaluated here, deterministically, on ``seeds``."""
    import safetensors.torch

    from faasrl.rl.policy import ActorCritic, PolicySpec
    from faasrl.rl.rollout import evaluate

    policy = ActorCritic(PolicySpec.from_dict(job["policy"]))
    policy.load_state_dict(safetensors.torch.load(client.model(job["id"])))
    return evaluate(policy, job["spec"]["env_id"], episodes=len(seeds), seed=seeds.start)


def test_a_confirmed_target_is_reported_by_an_evaluation_on_held_out_seeds(client: Client):
    """CartPole's episodes last 8 steps or more, so a target of 5 is reached and confirmed
    after the first round; the job then evaluates again, on the final seeds, and reports that."""
    job = client.submit({**SHORT, "seed": 3, "evaluation_episodes": 3,
                         "stop": {"target_reward": 5, "target_window": 2, "max_rounds": 50}})
    done = finished(client, job["id"])
    assert done["status"] == "succeeded" and done["round"] == 1, done
    assert ", confirmation mean " in done["stop_reason"] and reached_target(done["stop_reason"])
    confirmation, final = done["confirmation"], done["evaluation"]
    assert confirmation["version"] == final["version"] == done["version"]
    held_out, confirming = evaluation_seeds(3, "final", 3), evaluation_seeds(3, "confirmation", 3)
    assert (final["first_seed"], confirmation["first_seed"]) == (held_out.start, confirming.start)
    assert final["returns"] == _evaluate_locally(client, done, held_out)
    assert confirmation["returns"] == _evaluate_locally(client, done, confirming)


def test_a_job_without_evaluation_episodes_stops_on_the_training_mean_unevaluated(
        client: Client):
    job = client.submit({**SHORT, "evaluation_episodes": 0,
                         "stop": {"target_reward": 5, "target_window": 2, "max_rounds": 50}})
    done = finished(client, job["id"])
    # It stops after the first round whose window holds 2 episodes (every CartPole episode of
    # an untrained policy reaches 5).
    seen = list(itertools.accumulate(r["episodes"] for r in client.job_metrics(job["id"])))
    window_full = next(i for i, n in enumerate(seen, start=1) if n >= 2)
    assert done["status"] == "succeeded" and done["round"] == window_full, done
    assert done["stop_reason"].endswith("over 2 episodes")
    assert done["confirmation"] is None and done["evaluation"] is None


def test_cancel_then_resume_continues_from_the_last_round(client: Client, platform):
    job = client.submit({**SHORT, "stop": {"max_rounds": 400}, "checkpoint_every": 1})
    wait_for(lambda: client.job(job["id"])["round"] >= 2, timeout_s=120, what="two rounds")
    cancelled = client.cancel_job(job["id"])
    assert cancelled["status"] == "cancelled"
    at = cancelled["round"]
    time.sleep(0.5)
    assert client.job(job["id"])["round"] == at  # nothing runs any more
    checkpoint = platform.settings.state_dir / "jobs" / job["id"]
    assert json.loads((checkpoint / "record.json").read_text())["round"] == at
    with pytest.raises(GatewayError) as err:
        client.cancel_job(job["id"])
    assert err.value.status == 409
    client.resume_job(job["id"])
    with pytest.raises(GatewayError) as err:
        client.resume_job(job["id"])
    assert err.value.status == 409
    wait_for(lambda: client.job(job["id"])["round"] >= at + 2, timeout_s=120,
             what="rounds after resuming")
    client.cancel_job(job["id"])
    rows = client.job_metrics(job["id"])
    assert [r["round"] for r in rows] == list(range(len(rows)))  # no gap, no repeat
    assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))


def test_job_survives_a_gateway_restart(make_platform):
    first = make_platform(register_builtins=True)
    with first.client() as client:
        job = client.submit({**SHORT, "stop": {"max_rounds": 6}})
        wait_for(lambda: client.job(job["id"])["round"] >= 2, timeout_s=120, what="two rounds")
    first.stop()
    second = make_platform(register_builtins=True)
    with second.client() as client:
        done = finished(client, job["id"])
        assert done["status"] == "succeeded" and done["round"] == 6
        rows = client.job_metrics(job["id"])
    assert len({r["round"] for r in rows}) == len(rows)
    assert rows[-1]["round"] == 5


def test_job_resumes_from_its_disk_checkpoint_when_redis_lost_the_weights(make_platform,
                                                                           redis_url):
    first = make_platform(register_builtins=True)
    with first.client() as client:
        job = client.submit({**SHORT, "stop": {"max_rounds": 6}})
        wait_for(lambda: client.job(job["id"])["round"] >= 2, timeout_s=120, what="two rounds")
    first.stop()  # an interrupted job writes its checkpoint
    saved = json.loads((first.settings.state_dir / "jobs" / job["id"] / "record.json")
                       .read_text())
    with redis.Redis.from_url(redis_url) as r:  # weights and optimizer gone, the record stays
        doomed = [k for k in r.scan_iter(f"{job_prefix(job['id'])}*")
                  if b":params" in k or b":optimizer" in k]
        assert doomed
        r.delete(*doomed)
    second = make_platform(register_builtins=True)
    with second.client() as client:
        done = finished(client, job["id"])
        rows = client.job_metrics(job["id"])
    assert done["status"] == "succeeded" and done["round"] == 6
    assert [r["version"] for r in rows if r["round"] >= saved["round"]] == \
        list(range(saved["version"] + 1, 7))


def test_a_stop_request_ends_the_job_even_if_its_cancellation_was_lost(client: Client, platform):
    """Python 3.11's asyncio.wait_for (inside redis-py) can drop a task's cancellation; the
    driver's stop flag alone must still end the job, after the round it is in."""
    job = client.submit({**SHORT, "stop": {"max_rounds": 400}})
    wait_for(lambda: client.job(job["id"])["round"] >= 1, timeout_s=120, what="a round")
    driver, _ = platform._app.state.services.jobs._running[job["id"]]
    driver.stop_requested = "cancelled"  # what JobManager.cancel sets; no task.cancel()
    done = finished(client, job["id"])
    assert done["status"] == "cancelled" and done["round"] < 400, done


def test_malformed_trajectory_blob_is_rejected_not_trained_on(client: Client):
    client.deploy(fn("half-bad-actor", handler="fns:half_bad_actor", cpu=1, memory_mb=2048))
    job = client.submit({**SHORT, "actor_function": "half-bad-actor", "stop": {"max_rounds": 2},
                         "evaluation_episodes": 0})
    done = finished(client, job["id"])
    assert done["status"] == "succeeded", done
    for row in client.job_metrics(job["id"]):
        assert row["rejected"] == 1 and row["samples"] == 64  # slot 1's batch only
        assert "keys: missing" in row["rejected_reasons"][0]


def test_job_whose_learner_gets_nothing_valid_fails_clearly(client: Client):
    client.deploy(fn("bad-actor", handler="fns:half_bad_actor", cpu=1, memory_mb=2048))
    job = client.submit({**SHORT, "actor_function": "bad-actor",
                         "controller": {"name": "fixed", "actors": 1}})
    done = finished(client, job["id"])
    assert done["status"] == "failed"
    assert "no valid trajectories" in done["error"] and "keys: missing" in done["error"]


@pytest.mark.parametrize(("body", "field"), [
    ({"env_id": "NoSuchEnv-v0"}, "env_id"),
    ({"env_id": "CartPole-v1", "algorithm": "rainbow"}, "algorithm"),
    ({"env_id": "CartPole-v1", "controller": {"name": "fixed", "actors": 0}},
     "controller.fixed.actors"),
    ({"env_id": "CartPole-v1", "stop": {"max_rounds": None}}, "stop"),
    ({"env_id": "CartPole-v1", "actor_function": "nope"}, "actor_function"),
    ({"envs_per_actor": 2}, "env_id"),
])
def test_bad_job_specs_are_422_naming_the_field(platform, body, field):
    resp = httpx.post(f"{platform.url}/v1/jobs", json=body)
    assert resp.status_code == 422, resp.text
    assert field in resp.json()["error"]["fields"], resp.json()


def test_a_job_whose_function_cannot_run_here_now_is_422_naming_it(client: Client, tmp_path):
    """A function that cannot run here any more (its folder gone since its deploy; on Ray, the
    nodes that could hold it gone) would fail the job at round 0: refused at submit instead."""
    code = tmp_path / "code"
    shutil.copytree(fn()["code_dir"], code)
    client.deploy(fn("moved", code_dir=str(code)))
    shutil.rmtree(code)
    with pytest.raises(GatewayError) as exc:
        client.submit({**SHORT, "learner_function": "moved"})
    assert exc.value.status == 422 and "learner_function" in exc.value.fields, exc.value
    assert "code_dir" in exc.value.fields["learner_function"]


def test_unknown_jobs_are_404(platform):
    for method, path in (("GET", "/v1/jobs/nope"), ("GET", "/v1/jobs/nope/metrics"),
                         ("GET", "/v1/jobs/nope/events"), ("POST", "/v1/jobs/nope/cancel"),
                         ("POST", "/v1/jobs/nope/resume"), ("DELETE", "/v1/jobs/nope")):
        assert httpx.request(method, f"{platform.url}{path}").status_code == 404, path


def test_delete_removes_the_jobs_data(client: Client, platform, redis_url):
    import redis

    job = client.submit(SHORT)
    finished(client, job["id"])
    with redis.Redis.from_url(redis_url) as r:
        assert r.keys(f"faasrl:job:{job['id']}:*")
        client.delete_job(job["id"])
        assert r.keys(f"faasrl:job:{job['id']}:*") == []
    assert not (platform.settings.state_dir / "jobs" / job["id"]).exists()
    with pytest.raises(GatewayError):
        client.job(job["id"])


@pytest.mark.slow
def test_ppo_learns_cartpole_to_475(client: Client):
    from faasrl.user_input import load_yaml

    spec = load_yaml((REPO / "examples" / "cartpole.yaml").read_text())
    job = client.submit(spec)
    done = finished(client, job["id"], timeout_s=900)
    assert done["status"] == "succeeded", done
    assert done["evaluation"]["mean"] >= 475, done["evaluation"]
