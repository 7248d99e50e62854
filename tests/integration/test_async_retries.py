"""Asynchronous invocations on a real gateway with real runtimes: retries with back-off, the
dead-letter list and its redrive, destinations, the Lambda API's Event, a restart mid-back-off."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from helpers import fn, wait_for
from redis.asyncio import Redis

from faasrl.client import Client, GatewayError
from faasrl.gateway.async_events import CHAIN_MAX
from faasrl.gateway.keys import KeyStore
from faasrl.namespaces import Namespace

BASE_S = 0.2  # the back-off before a first retry here; then twice that
PLATFORM = {"async_retry_base_s": BASE_S}


def counter(tmp_path: Path) -> str:
    return str(tmp_path / f"runs-{uuid.uuid4().hex}")


def letters(client: Client, name: str, count: int, timeout_s: float = 20) -> list[dict]:
    return wait_for(lambda: len(out := client.dead_letters(name)) >= count and out,
                    timeout_s, what=f"{count} dead letter(s) of {name}")


def attempts(client: Client, first: str) -> list[dict[str, Any]]:
    """An async invocation's attempts' records, oldest first, following ``retried_by``."""
    chain = [client.wait(first, follow_retries=False)]
    while chain[-1]["retried_by"]:
        chain.append(client.wait(chain[-1]["retried_by"], follow_retries=False))
    return chain


def assert_backed_off(chain: list[dict[str, Any]]) -> None:
    for n, (failed, retry) in enumerate(itertools.pairwise(chain)):
        assert retry["requested_at"] - failed["finished_at"] >= BASE_S * 2 ** n * 0.95


def test_failing_twice_then_succeeding_is_retried_with_back_off(client: Client, tmp_path):
    client.deploy(fn("t", handler="fns:fail_times"))
    iid = client.invoke_async("t", {"counter": counter(tmp_path), "fail": 2})
    done = client.wait(iid, timeout_s=20)
    assert done["status"] == "success" and done["result"] == {"runs": 3}
    assert done["retry_of"] == iid and done["id"] != iid
    chain = attempts(client, iid)
    assert [r["status"] for r in chain] == ["error", "error", "success"]
    assert chain[0]["error"]["type"] == "RuntimeError" and chain[0]["retry_of"] is None
    assert all(r["retry_of"] == iid for r in chain[1:])
    assert_backed_off(chain)
    assert client.dead_letters("t") == []


def test_always_failing_lands_in_the_dead_letter_list_after_three_attempts(client: Client):
    client.deploy(fn("t", handler="fns:boom"))
    iid = client.invoke_async("t", {"x": 1})
    [letter] = letters(client, "t", 1)
    assert letter["id"] == iid and letter["function"] == "t" and letter["args"] == {"x": 1}
    assert letter["condition"] == "RetriesExhausted" and letter["attempts"] == 3
    assert letter["error"]["type"] == "ValueError" and "bad value" in letter["error"]["message"]
    chain = attempts(client, iid)
    assert [r["id"] for r in chain] == letter["invocation_ids"] and len(chain) == 3
    assert [r["status"] for r in chain] == ["error"] * 3
    assert_backed_off(chain)
    assert letter["requested_at"] <= chain[0]["requested_at"] < letter["failed_at"]
    assert client.wait(iid)["id"] == chain[-1]["id"]  # wait follows the retries to the last


def test_synchronous_invocations_are_not_retried(client: Client, tmp_path):
    client.deploy(fn("t", handler="fns:fail_times"))
    out = client.invoke("t", {"counter": counter(tmp_path), "fail": 1})
    assert out["status"] == "error" and out["retried_by"] is None
    assert client.dead_letters("t") == []


def test_no_retries_when_maximum_retry_attempts_is_0(client: Client, tmp_path):
    client.deploy(fn("t", handler="fns:fail_times", maximum_retry_attempts=0))
    iid = client.invoke_async("t", {"counter": counter(tmp_path), "fail": 1})
    [letter] = letters(client, "t", 1)
    assert letter["attempts"] == 1 and letter["invocation_ids"] == [iid]
    assert client.wait(iid)["retried_by"] is None


def test_an_event_past_its_maximum_age_is_not_retried(make_platform):
    # A first retry due 61 s after acceptance is past a 60 s maximum age: dead-lettered at once.
    with make_platform(async_retry_base_s=61).client() as client:
        client.deploy(fn("t", handler="fns:boom", maximum_event_age_s=60))
        iid = client.invoke_async("t", 1)
        [letter] = letters(client, "t", 1)
    assert letter["condition"] == "EventAgeExceeded" and letter["attempts"] == 1
    assert letter["invocation_ids"] == [iid] and "maximum_event_age_s 60" in letter["reason"]


def test_redrive_one_and_all_and_delete(client: Client):
    client.deploy(fn("t", handler="fns:boom", maximum_retry_attempts=0))
    ids = [client.invoke_async("t", n) for n in range(3)]
    assert {d["id"] for d in letters(client, "t", 3)} == set(ids)
    client.deploy(fn("t", handler="fns:echo", maximum_retry_attempts=0))  # fixed
    [one] = client.redrive("t", ids[0])
    assert one["dead_letter"] == ids[0]
    assert client.wait(one["invocation"])["result"]["args"] == 0
    assert {d["id"] for d in client.dead_letters("t")} == set(ids[1:])

    client.delete_dead_letter("t", ids[1])
    with pytest.raises(GatewayError) as err:
        client.delete_dead_letter("t", ids[1])
    assert err.value.status == 404
    with pytest.raises(GatewayError) as err:
        client.redrive("t", ids[1])
    assert err.value.status == 404

    [rest] = client.redrive("t")
    assert rest["dead_letter"] == ids[2]
    assert client.wait(rest["invocation"])["result"]["args"] == 2
    assert client.dead_letters("t") == []


async def _redrive_at_once(url: str, body: dict[str, Any], times: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url) as http:
        return await asyncio.gather(*(http.post("/v1/functions/t/dead-letters/redrive", json=body)
                                      for _ in range(times)))


@pytest.mark.parametrize("body", [{"id": None}, {"all": True}])
def test_a_letter_redriven_twice_at_once_runs_once(client: Client, body):
    client.deploy(fn("t", handler="fns:boom", maximum_retry_attempts=0))
    iid = client.invoke_async("t", 7)
    letters(client, "t", 1)
    client.deploy(fn("t", handler="fns:echo", maximum_retry_attempts=0))
    body = {"id": iid} if "id" in body else body
    answers = asyncio.run(_redrive_at_once(client.url, body, 4))
    redriven = [d for a in answers if a.status_code == 200 for d in a.json()["redriven"]]
    assert [d["dead_letter"] for d in redriven] == [iid]  # not one new invocation per request
    assert client.wait(redriven[0]["invocation"])["result"]["args"] == 7
    assert client.dead_letters("t") == []


def test_destinations_receive_lambdas_record(client: Client):
    client.deploy(fn("dest"))
    client.deploy(fn("ok", on_success="dest"))
    client.deploy(fn("bad", handler="fns:boom", maximum_retry_attempts=1, on_failure="dest"))
    good, failed = client.invoke_async("ok", {"a": 1}), client.invoke_async("bad", {"b": 2})
    sent = wait_for(lambda: len(r := [i for i in client.invocations("dest")
                                      if i["status"] == "success"]) == 2 and r,
                    timeout_s=20, what="both destination invocations")
    by_condition = {r["result"]["args"]["requestContext"]["condition"]: r["result"]["args"]
                    for r in sent}
    success, failure = by_condition["Success"], by_condition["RetriesExhausted"]
    assert success["requestContext"]["requestId"] == good
    assert success["requestContext"]["functionArn"].endswith(":function:ok:$LATEST")
    assert success["requestContext"]["approximateInvokeCount"] == 1
    assert success["requestPayload"] == {"a": 1}
    assert success["responsePayload"]["args"] == {"a": 1}
    assert success["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST"}
    assert success["version"] == "1.0" and success["timestamp"].endswith("Z")
    assert failure["requestContext"]["requestId"] == failed
    assert failure["requestContext"]["approximateInvokeCount"] == 2
    assert failure["requestPayload"] == {"b": 2}
    assert failure["responseContext"]["functionError"] == "Unhandled"
    assert failure["responsePayload"]["errorType"] == "ValueError"
    assert "bad value" in failure["responsePayload"]["errorMessage"]
    assert len(client.dead_letters("bad")) == 1  # and it is dead-lettered too


def test_functions_that_are_each_others_destination_stop_after_16_invocations(client: Client):
    client.deploy(fn("ping", on_success="pong"))
    client.deploy(fn("pong", on_success="ping"))
    client.invoke_async("ping")

    def made() -> int:
        return sum(len(client.invocations(name, limit=100)) for name in ("ping", "pong"))

    wait_for(lambda: made() >= CHAIN_MAX, timeout_s=30, what=f"{CHAIN_MAX} invocations")
    time.sleep(3.0)  # a loop goes on: about one more each second on a loaded 2-core machine
    assert made() == CHAIN_MAX


def test_lambda_api_events_are_retried_and_dead_lettered(platform, client: Client):
    client.deploy(fn("t", handler="fns:boom", maximum_retry_attempts=1))
    aws = boto3.client("lambda", endpoint_url=platform.url, region_name="us-east-1",
                       aws_access_key_id="faasrl", aws_secret_access_key="any",
                       config=Config(retries={"total_max_attempts": 1}))
    resp = aws.invoke(FunctionName="t", InvocationType="Event", Payload=b'{"e": 1}')
    assert resp["StatusCode"] == 202
    [letter] = letters(client, "t", 1)
    assert letter["id"] == resp["ResponseMetadata"]["RequestId"]
    assert letter["attempts"] == 2 and letter["args"] == {"e": 1}


def test_a_retry_waiting_when_the_gateway_stops_runs_after_its_restart(make_platform,
                                                                        tmp_path):
    first = make_platform(async_retry_base_s=1.5)
    with first.client() as client:
        client.deploy(fn("t", handler="fns:fail_times"))
        iid = client.invoke_async("t", {"counter": counter(tmp_path), "fail": 1})
        wait_for(lambda: client.invocation(iid)["retried_by"], what="the first attempt to fail")
    first.stop()  # during the back-off
    with make_platform(async_retry_base_s=1.5).client() as client:
        done = client.wait(iid, timeout_s=20)
    assert done["status"] == "success" and done["retry_of"] == iid


def test_an_attempt_running_when_the_gateway_stops_is_retried_after_its_restart(
        make_platform, tmp_path):
    first = make_platform(**PLATFORM)
    with first.client() as client:
        client.deploy(fn("t", handler="fns:slow_first"))
        iid = client.invoke_async("t", {"marker": counter(tmp_path), "s": 60})
        wait_for(lambda: client.invocation(iid)["status"] == "running", what="it to run")
    first.stop()
    with make_platform(**PLATFORM).client() as client:
        done = client.wait(iid, timeout_s=20)
        cancelled = client.invocation(iid)
    assert done["status"] == "success" and done["retry_of"] == iid
    assert cancelled["error"]["type"] == "Cancelled" and cancelled["retried_by"] == done["id"]


def test_bad_input_is_a_422_naming_the_field(client: Client):
    for field, value in (("maximum_retry_attempts", 3), ("maximum_event_age_s", 59),
                         ("maximum_event_age_s", 21601), ("on_success", "no spaces"),
                         ("on_failure", "t")):
        resp = httpx.post(f"{client.url}/v1/functions", json=fn("t", **{field: value}))
        assert resp.status_code == 422, (field, value)
        assert field in resp.json()["error"]["fields"], resp.json()
    spec = {k: v for k, v in fn(on_success="t").items() if k != "name"}  # the path names it
    resp = httpx.put(f"{client.url}/v1/functions/t", json=spec)
    assert resp.status_code == 422 and "on_success" in resp.json()["error"]["fields"]
    client.deploy(fn("t"))
    url = f"{client.url}/v1/functions/t/dead-letters"
    for body, field in (({}, "id"), ({"id": uuid.uuid4().hex, "all": True}, "id"),
                        ({"id": "not-hex"}, "id"), ({"all": "yes"}, "all")):
        resp = httpx.post(f"{url}/redrive", json=body)
        assert resp.status_code == 422 and field in resp.json()["error"]["fields"], body
    assert httpx.delete(f"{url}/not-an-id").status_code == 422
    assert httpx.get(f"{client.url}/v1/functions/nope/dead-letters").status_code == 404


async def _other_namespace(url: str) -> str:
    redis = Redis.from_url(url)
    try:
        keys = KeyStore(redis)
        await keys.save_namespace(Namespace(name="lab-b"))
        _, key = await keys.create_key("lab-b", "admin")
        return key
    finally:
        await redis.aclose()


def test_another_namespace_gets_404(make_platform, redis_url):
    key = asyncio.run(_other_namespace(redis_url))  # before the gateway loads its keys
    platform = make_platform(token="root-token", **PLATFORM)
    with Client(platform.url, "root-token") as client:
        client.deploy(fn("t", handler="fns:boom", maximum_retry_attempts=0))
        iid = client.invoke_async("t")
        letters(client, "t", 1)
    url = f"{platform.url}/v1/functions/t/dead-letters"
    for headers in ({"Authorization": f"Bearer {key}"},
                    {"Authorization": "Bearer root-token", "X-Faasrl-Namespace": "lab-b"}):
        assert httpx.get(url, headers=headers).status_code == 404
        assert httpx.post(f"{url}/redrive", json={"all": True},
                          headers=headers).status_code == 404
        assert httpx.post(f"{url}/redrive", json={"id": iid}, headers=headers).status_code == 404
        assert httpx.delete(f"{url}/{iid}", headers=headers).status_code == 404
    with Client(platform.url, "root-token") as client:
        assert [d["id"] for d in client.dead_letters("t")] == [iid]  # untouched
