"""The Lambda backend end to end: boto3 against the gateway's own Lambda API over real HTTP.

A function placed on Lambda names, as its Lambda twin, a function of the same gateway
(``endpoint_url`` = the gateway): every invocation goes gateway → Lambda backend → boto3 →
HTTP + SigV4 → Lambda API → a real local container, and back.
"""

from __future__ import annotations

import pytest
from helpers import REPO, finished, fn, wait_for

from faasrl.client import Client, GatewayError
from faasrl.manifest import load_manifest

TOKEN = "lambda-backend-test-token"


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's standard chain finds the gateway's Lambda API key in the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "faasrl")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)


def on_lambda(name: str, twin: str, url: str, **kw) -> dict:
    """A function placed on Lambda whose Lambda function is ``twin`` on the gateway at url."""
    return fn(name, placement="lambda",
              aws_lambda={"function_name": twin, "endpoint_url": url}, **kw)


def test_invocations_go_through_lambda_and_are_billed_from_its_report(make_platform):
    platform = make_platform(token=TOKEN)
    with platform.client() as c:
        c.deploy(fn("t", memory_mb=320))
        c.deploy(on_lambda("t-lambda", "t", platform.url))
        first = c.invoke("t-lambda", {"x": 1})
        second = c.invoke("t-lambda", {"x": 2})
        local = wait_for(lambda: len(r := c.invocations("t", 10)) == 2 and r,
                         what="the Lambda API's local records")
    assert first["status"] == "success" and first["result"]["args"] == {"x": 1}
    assert first["backend"] == "lambda" and first["attempts"] == 1
    # Billed duration, memory and the cold start come from the REPORT line of the tail log.
    by_args = {r["result"]["args"]["x"]: r for r in local}
    assert first["billed_ms"] == by_args[1]["billed_ms"] > 0
    assert second["billed_ms"] == by_args[2]["billed_ms"] > 0
    assert first["memory_mb"] == second["memory_mb"] == 320
    assert first["cold"] and not second["cold"]
    assert first["init_s"] == pytest.approx(by_args[1]["init_s"], abs=1e-3)
    assert {r["backend"] for r in local} == {"process"}


def test_handler_errors_and_timeouts_map_onto_the_record(make_platform):
    platform = make_platform(token=TOKEN)
    with platform.client() as c:
        c.deploy(fn("boom", handler="fns:boom"))
        c.deploy(fn("slow", handler="fns:sleep", timeout_s=0.5))
        c.deploy(on_lambda("boom-lambda", "boom", platform.url))
        c.deploy(on_lambda("slow-lambda", "slow", platform.url, timeout_s=5))
        c.deploy(on_lambda("gone-lambda", "no-such-function", platform.url))
        boom = c.invoke("boom-lambda", 7)
        slow = c.invoke("slow-lambda", {"s": 3})
        gone = c.invoke("gone-lambda", None)
    assert boom["status"] == "error" and boom["backend"] == "lambda"
    assert boom["error"]["type"] == "ValueError" and boom["error"]["message"] == "bad value: 7"
    assert "raise ValueError" in boom["error"]["traceback"]
    assert slow["status"] == "timeout" and "Task timed out" in slow["error"]["message"]
    assert gone["status"] == "error" and gone["attempts"] == 1
    assert gone["error"]["type"] == "ResourceNotFoundException"


def test_a_wrong_secret_is_an_error_not_a_retry(make_platform, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    platform = make_platform(token=TOKEN)
    with platform.client() as c:
        c.deploy(fn("t"))
        c.deploy(on_lambda("t-lambda", "t", platform.url))
        rec = c.invoke("t-lambda", 1)
    assert rec["status"] == "error" and rec["attempts"] == 1
    assert rec["error"]["type"] == "InvalidSignatureException"


@pytest.mark.parametrize("retries", [0, 2])
def test_throttling_is_retried_then_reported(make_platform, retries):
    # One container at a time and no queue: while the sleeper runs, the Lambda API answers
    # 429 TooManyRequestsException, as Lambda does past its concurrency limit.
    platform = make_platform(token=TOKEN, node_cpu=0.1, max_queue=0,
                             lambda_throttle_retries=retries)
    with platform.client() as c:
        c.deploy(fn("s", handler="fns:sleep", timeout_s=60))
        c.deploy(on_lambda("s-lambda", "s", platform.url, timeout_s=60))
        c.invoke_async("s", {"s": 30})
        wait_for(lambda: c.cluster()["functions"]["s"]["containers"]
                 and c.cluster()["functions"]["s"]["containers"][0]["state"] == "busy",
                 what="the sleeper to hold the node's only core")
        rec = c.invoke("s-lambda", {"s": 0})
    assert rec["status"] == "error" and rec["attempts"] == retries + 1
    assert rec["error"]["type"] == "TooManyRequestsException"


ACTOR_CALLS = 1 + 2 * 2 + 2  # the env's describe probe, the rollouts, the evaluation


def test_cartpole_job_with_actors_on_lambda_and_the_learner_local(make_platform):
    platform = make_platform(token=TOKEN, register_builtins=True)
    actor = load_manifest(REPO / "functions" / "actor").model_dump()
    actor["aws_lambda"] = {"function_name": "actor", "endpoint_url": platform.url}
    with platform.client() as c:
        c.deploy(actor)
        job = c.submit({"env_id": "CartPole-v1", "envs_per_actor": 2, "steps_per_actor": 32,
                        "controller": {"name": "fixed", "actors": 2},
                        "placement": {"actors": "lambda"}, "evaluation_episodes": 2,
                        "stop": {"max_rounds": 2}})
        done = finished(c, job["id"])
        # Records are written in batches: wait for the submit's env probe (where the actors
        # run), the rollouts and the evaluation (its two episodes split between the two actor
        # slots), each twice (through the Lambda backend, and served by the Lambda API).
        actors = wait_for(lambda: len(r := c.invocations("actor", 100)) >= 2 * ACTOR_CALLS
                          and r, what="the actor records")
        learner = c.invocations("learner", 100)
    assert done["status"] == "succeeded", done
    assert (done["round"], done["env_steps"]) == (2, 2 * 2 * 2 * 32)
    assert done["evaluation"]["episodes"] == 2
    on_lambda_ = [r for r in actors if r["backend"] == "lambda"]
    served_locally = [r for r in actors if r["backend"] == "process"]
    assert len(on_lambda_) == len(served_locally) == ACTOR_CALLS
    assert all(r["billed_ms"] > 0 and r["status"] == "success" for r in on_lambda_)
    assert learner and {r["backend"] for r in learner} == {"process"}
    assert done["cost_usd"] > 0


def test_lambda_placement_needs_a_lambda_twin(make_platform):
    platform = make_platform(token=TOKEN, register_builtins=True)
    with platform.client() as c, pytest.raises(GatewayError) as err:
        c.submit({"env_id": "CartPole-v1", "placement": {"actors": "lambda"}})
    assert err.value.status == 422 and "placement.actors" in err.value.fields
    with Client(platform.url, TOKEN) as c, pytest.raises(GatewayError) as err:
        c.deploy(fn("x", placement="lambda"))
    assert err.value.status == 422 and "aws_lambda" in err.value.fields
