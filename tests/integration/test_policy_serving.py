"""Serving a job's policy: a real gateway (process backend), tiny real jobs, the built-in
policy function deployed by ``POST /v1/jobs/{id}/serve`` and invoked over REST, the CLI and
boto3's Lambda client."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import httpx
import numpy as np
import pytest
import redis
from botocore.config import Config
from helpers import CORRIDOR_DIR, evaluation_actions, fn, namespace_key, succeeded, wait_for
from typer.testing import CliRunner

from faasrl.algorithms import algorithm
from faasrl.cli import app
from faasrl.client import Client, GatewayError
from faasrl.contracts import POLICY_ENV, PolicyConfig
from faasrl.data.acl import serving_user
from faasrl.data.codec import decode_tensors
from faasrl.data.connection import without_credentials
from faasrl.data.keys import params_key, served_key
from faasrl.jobs.spec import JobSpec
from faasrl.rl.policy import PolicySpec

TOKEN = "serving-token"
PLATFORM = {"register_builtins": True, "token": TOKEN}
OFF_POLICY = {"learning_starts": 64, "batch_size": 32}
JOBS: dict[str, dict[str, Any]] = {
    "ppo": {"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32},
    "dqn": {"algorithm": "dqn", "env_id": "CartPole-v1", "steps_per_actor": 64,
            "hyperparameters": OFF_POLICY},
    "sac": {"algorithm": "sac", "env_id": "Pendulum-v1", "steps_per_actor": 64,
            "hyperparameters": OFF_POLICY},
}
rng = np.random.default_rng(0)
OBS = {"CartPole-v1": rng.normal(0, 1, (16, 4)).astype(np.float32),
       "Pendulum-v1": np.concatenate([rng.uniform(-1, 1, (16, 2)), rng.uniform(-8, 8, (16, 1))],
                                     axis=1).astype(np.float32)}


def trained(client: Client, case: str, rounds: int = 2) -> dict[str, Any]:
    job = client.submit({**JOBS[case], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": rounds}})
    return succeeded(client, job["id"])


def jobs_model(client: Client, job: dict[str, Any], version: int) -> Any:
    """The job's model of ``version``, built as its functions build it."""
    name = job["spec"]["algorithm"]
    cfg = JobSpec.model_validate(job["spec"]).hyperparameters
    model = algorithm(name).make_model(PolicySpec.from_dict(job["policy"]), cfg)
    weights, _ = decode_tensors(client.model(job["id"], version))
    model.load_state_dict(weights)
    return model


def lambda_client(url: str):
    return boto3.client("lambda", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="faasrl", aws_secret_access_key=TOKEN,
                        config=Config(retries={"total_max_attempts": 1}))


@pytest.mark.parametrize("case", list(JOBS))
def test_a_served_policy_answers_the_jobs_evaluation_actions(case: str, client: Client):
    job = trained(client, case)
    served = client.serve_job(job["id"])
    assert served == {"function": f"{job['id']}-policy", "job": job["id"],
                      "version": job["version"], "replaced": False}
    obs = OBS[job["spec"]["env_id"]]
    expected = evaluation_actions(job["spec"]["algorithm"], jobs_model(client, job,
                                                                       job["version"]), obs)
    batch = client.invoke(served["function"], {"obs": obs.tolist()})
    assert batch["status"] == "success", batch
    assert batch["result"]["version"] == job["version"]
    one = client.invoke(served["function"], {"obs": obs[0].tolist()})["result"]
    if case == "sac":
        np.testing.assert_allclose(batch["result"]["actions"], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(one["actions"], expected[0], rtol=1e-5, atol=1e-5)
    else:
        assert batch["result"]["actions"] == expected.tolist()
        assert one["actions"] == expected[0]
    assert len(np.unique(expected, axis=0)) > 1  # a constant policy would prove little
    # Recorded and billed as any function's invocation; warm after the first.
    assert batch["function"] == served["function"] and batch["billed_ms"] > 0
    recs = client.invocations(served["function"], limit=10)
    assert len(recs) == 2 and [r["cold"] for r in sorted(recs, key=lambda r:
                                                         r["requested_at"])] == [True, False]


def test_a_pinned_version_is_served_after_training_moved_on(client: Client, r: redis.Redis):
    """An older version (``--version``, the CLI) keeps its copy when the job's newest-few
    rotation drops it; the CLI, REST and boto3 all reach the function."""
    job = trained(client, "ppo", rounds=6)
    first = job["version"] - 3  # kept: the newest 4
    runner = CliRunner()
    env = {"FAASRL_URL": client.url, "FAASRL_TOKEN": TOKEN}
    done = runner.invoke(app, ["jobs", "serve", job["id"], "--version", str(first),
                               "--name", "pinned"], env=env)
    assert done.exit_code == 0, done.output
    assert "pinned" in done.output and str(first) in done.output
    r.delete(params_key(job["id"], first))  # as the rotation would
    assert r.exists(served_key(job["id"], first))
    obs = OBS["CartPole-v1"]
    expected = evaluation_actions("ppo", jobs_model(client, job, job["version"]), obs)
    out = client.invoke("pinned", {"obs": obs.tolist(), "outputs": ["values"]})["result"]
    assert out["version"] == first and len(out["values"]) == len(obs)
    latest = client.serve_job(job["id"], name="latest")
    assert client.invoke("latest", {"obs": obs.tolist()})["result"] == \
        {"actions": expected.tolist(), "version": latest["version"]}
    done = runner.invoke(app, ["invoke", "pinned", "--json",
                               json.dumps({"obs": obs[0].tolist()})], env=env)
    assert done.exit_code == 0 and '"version"' in done.output, done.output
    answer = lambda_client(client.url).invoke(FunctionName="pinned",
                                              Payload=json.dumps({"obs": obs[:3].tolist()}))
    assert "FunctionError" not in answer
    assert json.loads(answer["Payload"].read())["version"] == first
    with pytest.raises(GatewayError) as refused:  # neither kept nor served
        client.serve_job(job["id"], version=0)
    assert refused.value.status == 422 and "version" in refused.value.fields


def test_a_job_whose_env_came_as_code_serves_and_another_function_invokes_it(
        client: Client, platform: Any):
    """The policy function needs nothing of the env's code (its container never sees the
    archive); another function reaches it through the gateway's Lambda API."""
    job = client.submit({"envs_per_actor": 2, "steps_per_actor": 32,
                         "env": {"code_sha256": client.upload_code(CORRIDOR_DIR),
                                 "entry_point": "corridor:Corridor"},
                         "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 1}})
    job = succeeded(client, job["id"])
    name = client.serve_job(job["id"])["function"]
    obs = np.linspace(0, 1, 8, dtype=np.float32)[:, None]
    expected = evaluation_actions("ppo", jobs_model(client, job, job["version"]), obs)
    client.deploy(fn("caller", handler="fns:invoke_other", memory_mb=512, timeout_s=60))
    out = client.invoke("caller", {"url": platform.url, "secret": TOKEN, "function": name,
                                   "payload": {"obs": obs.tolist()}})
    assert out["status"] == "success", out
    assert out["result"] == {"actions": expected.tolist(), "version": job["version"]}


MALFORMED = [("wrong shape", [0.1, 0.2, 0.3]), ("NaN", [0.1, float("nan"), 0.3, 0.4]),
             ("wrong dtype", ["a", "b", "c", "d"]), ("not a list", "0 0 0 0"),
             ("ragged", [[0.1, 0.2, 0.3, 0.4], [0.1]])]


def test_malformed_observations_are_400s_naming_obs_and_lambda_function_errors(
        client: Client, platform: Any):
    job = trained(client, "ppo", rounds=1)
    name = client.serve_job(job["id"])["function"]
    aws = lambda_client(platform.url)
    with httpx.Client(base_url=platform.url, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=60) as http:
        for case, obs in MALFORMED:
            body = json.dumps({"args": {"obs": obs}})  # NaN as Python writes it
            resp = http.post(f"/v1/functions/{name}/invoke", content=body,
                             headers={"Content-Type": "application/json"})
            assert resp.status_code == 400, (case, resp.text)
            err = resp.json()["error"]
            assert err["type"] == "InvalidArgs" and list(err["fields"]) == ["obs"], (case, err)
            assert client.invocation(err["invocation"])["status"] == "error"  # recorded
            answer = aws.invoke(FunctionName=name, Payload=json.dumps({"obs": obs}))
            assert answer["StatusCode"] == 200 and answer["FunctionError"] == "Unhandled"
            payload = json.loads(answer["Payload"].read())
            assert payload["errorType"] == "InvalidArgs", (case, payload)
            assert payload["errorMessage"].startswith("obs: "), (case, payload)
        good = http.post(f"/v1/functions/{name}/invoke", json={"args": {"obs": [0.0] * 4}})
        assert good.status_code == 200 and good.json()["status"] == "success"
    # Another function's failure is still a 200 with its record, not a 400.
    assert "InvalidArgs" not in client.invoke("actor", {"mode": "nonsense"})["error"]["type"]


def test_the_serving_user_reads_only_its_jobs_served_copies(client: Client, platform: Any,
                                                            redis_url: str):
    job = trained(client, "ppo", rounds=1)
    other = trained(client, "ppo", rounds=1)
    name = client.serve_job(job["id"])["function"]
    client.serve_job(other["id"])
    config = PolicyConfig.model_validate_json(client.function(name)["env"][POLICY_ENV])
    assert (config.job, config.version) == (job["id"], job["version"])
    as_served = redis.Redis.from_url(without_credentials(redis_url),
                                     username=config.redis.username,
                                     password=config.redis.password)
    assert as_served.get(served_key(job["id"], job["version"]))
    for denied in (lambda: as_served.get(params_key(job["id"], job["version"])),
                   lambda: as_served.get(served_key(other["id"], other["version"])),
                   lambda: as_served.set(served_key(job["id"], 99), b"x"),
                   lambda: as_served.keys("*"), lambda: as_served.get("faasrl:api-keys")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            denied()
    # Another namespace cannot serve the job (it is missing there); its own jobs serve in it.
    _, key = namespace_key(platform, "lab-b")
    with Client(platform.url, key) as b:
        with pytest.raises(GatewayError) as missing:
            b.serve_job(job["id"])
        assert missing.value.status == 404
        assert name not in [f["name"] for f in b.functions()]
    # Deleting the job takes its serving user with it.
    client.delete_job(job["id"])
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(without_credentials(redis_url), username=config.redis.username,
                             password=config.redis.password).ping()


def test_a_restarted_gateway_grants_the_serving_user_again(make_platform: Any, r: redis.Redis):
    """Redis keeps ACL users in memory only: a gateway grants every serving user again at
    start (and when Redis comes back), so a served policy works after Redis forgot its user."""
    first = make_platform(**PLATFORM)
    with first.client() as client:
        job = trained(client, "ppo", rounds=1)
        name = client.serve_job(job["id"])["function"]
    first.stop()
    r.execute_command("ACL", "DELUSER", serving_user(job["id"]))  # as a restarted Redis would
    with make_platform(**PLATFORM).client() as client:
        out = client.invoke(name, {"obs": [0.0] * 4})
    assert out["status"] == "success" and out["result"]["version"] == job["version"], out


def test_the_serve_rule_publishes_versions_to_its_alias_and_a_move_rolls_back(client: Client):
    """``serve: {alias, every}``: every 2 rounds and at the end the latest version is served,
    published as a function version and the alias moved to it; the record says where."""
    job = client.submit({**JOBS["ppo"], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 5},
                         "serve": {"alias": "live", "every": 2, "name": "rolling"}})
    job = succeeded(client, job["id"])
    published = client.versions("rolling")
    assert [v["version"] for v in published] == [1, 2, 3]  # rounds 2, 4 and the end
    assert all(job["id"] in v["description"] for v in published)
    serving = job["serving"]
    assert serving["function"] == "rolling" and serving["alias"] == "live"
    assert serving["function_version"] == 3 and serving["model_version"] == job["version"]
    assert serving["error"] is None
    assert client.alias("rolling", "live")["version"] == 3
    shown = CliRunner().invoke(app, ["jobs", "show", job["id"]],
                               env={"FAASRL_URL": client.url, "FAASRL_TOKEN": TOKEN})
    assert "rolling:live -> version 3" in " ".join(shown.output.split()), shown.output
    obs = OBS["CartPole-v1"]
    live = client.invoke("rolling", {"obs": obs.tolist()}, qualifier="live")
    assert live["status"] == "success" and live["result"]["version"] == job["version"]
    assert live["version"] == 3  # the record names the function version that answered

    client.set_alias("rolling", "live", 1)  # roll back
    back = client.invoke("rolling", {"obs": obs.tolist()}, qualifier="live")
    assert back["version"] == 1 and back["result"]["version"] < job["version"]
    expected = evaluation_actions("ppo", jobs_model(client, job, back["result"]["version"]),
                                  obs)
    assert back["result"]["actions"] == expected.tolist()


def test_a_serve_rule_naming_a_bad_alias_is_a_422_naming_it(client: Client):
    with pytest.raises(GatewayError) as refused:
        client.submit({**JOBS["ppo"], "serve": {"alias": "42", "every": 0}})
    assert refused.value.status == 422
    assert {"serve.alias", "serve.every"} <= set(refused.value.fields)


def test_the_serve_rule_keeps_its_newest_versions_and_the_weights_only_they_serve(
        client: Client, r: redis.Redis):
    job = client.submit({**JOBS["ppo"], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 5},
                         "serve": {"alias": "live", "every": 1, "keep": 2, "name": "pruned"}})
    job = succeeded(client, job["id"])
    assert [v["version"] for v in client.versions("pruned")] == [4, 5]
    served = {int(k.rsplit(b":", 1)[1]) for k in r.keys(served_key(job["id"], 0)[:-1] + "*")}
    # Model versions 1-5 were served by versions 1-5 (rounds 1-5); $LATEST serves the newest.
    assert served == {job["version"] - 1, job["version"]}


def _published(client: Client, job_id: str, at_least: int) -> dict[str, Any]:
    """The job's record once its serve rule has published ``at_least`` versions; cancelled."""
    wait_for(lambda: ((client.job(job_id).get("serving") or {}).get("function_version") or 0)
             >= at_least, timeout_s=120, what=f"function version {at_least}", poll_s=0.05)
    client.cancel_job(job_id)
    return wait_for(lambda: (j := client.job(job_id))["status"] == "cancelled" and j,
                    timeout_s=60, what="cancelled")


def test_an_alias_moved_by_hand_is_left_there_until_moved_back_to_the_newest(client: Client):
    """A rollback sticks while the job trains on: the rule publishes but leaves the alias;
    moved back to the rule's newest version, the alias follows the rule again."""
    job = client.submit({**JOBS["ppo"], "controller": {"name": "fixed", "actors": 1},
                         "evaluation_episodes": 0, "stop": {"max_rounds": 200},
                         "serve": {"alias": "live", "every": 2, "keep": 20, "name": "held"}})
    first = _published(client, job["id"], 2)["serving"]["function_version"]
    client.set_alias("held", "live", 1)  # the rollback
    client.resume_job(job["id"])
    rec = _published(client, job["id"], first + 2)
    assert client.alias("held", "live")["version"] == 1
    assert rec["serving"]["alias_version"] == 1 and rec["serving"]["function_version"] > first
    obs = OBS["CartPole-v1"]
    assert client.invoke("held", {"obs": obs.tolist()}, qualifier="live")["version"] == 1
    shown = CliRunner().invoke(app, ["jobs", "show", job["id"]],
                               env={"FAASRL_URL": client.url, "FAASRL_TOKEN": TOKEN})
    assert "held by hand" in shown.output, shown.output

    newest = rec["serving"]["function_version"]
    client.set_alias("held", "live", newest)  # follow the rule again
    client.resume_job(job["id"])
    rec = _published(client, job["id"], newest + 1)
    assert client.alias("held", "live")["version"] == rec["serving"]["function_version"] > newest
    assert rec["serving"]["alias_version"] == rec["serving"]["function_version"]


def test_two_teams_serve_policies_of_one_name_at_once_each_its_own(client: Client,
                                                                    platform: Any):
    """Two namespaces train, serve under the same function name and invoke it concurrently
    (REST and the Lambda API): each gets its own job's actions; neither sees the other's."""
    obs = OBS["CartPole-v1"]
    teams = {}
    for team in ("team-a", "team-b"):
        _, key = namespace_key(platform, team)
        teams[team] = Client(platform.url, key)
    try:
        jobs = {team: c.submit({**JOBS["ppo"], "seed": i + 7, "evaluation_episodes": 0,
                                "controller": {"name": "fixed", "actors": 1},
                                "stop": {"max_rounds": 2},
                                "serve": {"alias": "live", "every": 1, "name": "shared"}})
                for i, (team, c) in enumerate(teams.items())}
        jobs = {team: succeeded(teams[team], job["id"]) for team, job in jobs.items()}
        expected = {team: evaluation_actions("ppo", jobs_model(teams[team], job, job["version"]),
                                             obs).tolist() for team, job in jobs.items()}
        assert expected["team-a"] != expected["team-b"]  # two seeds, two policies

        def ask(team: str) -> list[Any]:
            return [teams[team].invoke("shared", {"obs": obs.tolist()}, qualifier="live")
                    for _ in range(20)]

        with ThreadPoolExecutor(4) as pool:
            answers = dict(zip(teams, pool.map(ask, teams), strict=True))
        for team, records in answers.items():
            assert {r["status"] for r in records} == {"success"}
            assert all(r["result"]["actions"] == expected[team] for r in records)
        for team, c in teams.items():  # each lists its own versions only
            assert [v["version"] for v in c.versions("shared")] == [1, 2]
            other = next(j for t, j in jobs.items() if t != team)
            with pytest.raises(GatewayError) as missing:
                c.job(other["id"])
            assert missing.value.status == 404
        assert "shared" not in [f["name"] for f in client.functions()]  # default's: none
    finally:
        for c in teams.values():
            c.close()
