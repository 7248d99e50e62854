"""The gateway's Lambda Invoke API through boto3 over real HTTP, with SigV4 verified."""

from __future__ import annotations

import base64
import json

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from helpers import fn, wait_for

from faasrl.backends.aws_lambda import parse_report
from faasrl.client import Client, GatewayError

TOKEN = "lambda-api-test-token"


def record(url: str, invocation_id: str) -> dict | None:
    """An invocation's record once it is written (records are written in batches)."""
    with Client(url, TOKEN) as c:
        try:
            return c.invocation(invocation_id)
        except GatewayError:
            return None


@pytest.fixture
def platform(make_platform):
    p = make_platform(token=TOKEN)
    with Client(p.url, TOKEN) as c:
        c.deploy(fn("t"))
        c.deploy(fn("boom", handler="fns:boom"))
        c.deploy(fn("slow", handler="fns:sleep", timeout_s=0.5))
    return p


def lambda_client(url: str, secret: str = TOKEN, key_id: str = "faasrl"):
    return boto3.client("lambda", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id=key_id, aws_secret_access_key=secret,
                        config=Config(retries={"total_max_attempts": 1}))


def test_request_response_returns_the_result_and_a_report(platform):
    aws = lambda_client(platform.url)
    resp = aws.invoke(FunctionName="t", Payload=json.dumps({"x": 1}), LogType="Tail")
    assert resp["StatusCode"] == 200 and "FunctionError" not in resp
    assert resp["ExecutedVersion"] == "$LATEST"
    assert json.loads(resp["Payload"].read())["args"] == {"x": 1}
    report = parse_report(base64.b64decode(resp["LogResult"]).decode())
    assert report["Memory Size"] == 256 and report["Billed Duration"] >= 1
    assert "Init Duration" in report  # the first invocation started its container

    request_id = resp["ResponseMetadata"]["RequestId"]
    rec = wait_for(lambda: record(platform.url, request_id), what="the invocation's record")
    assert rec["billed_ms"] == report["Billed Duration"] and rec["backend"] == "process"

    again = aws.invoke(FunctionName="arn:aws:lambda:us-east-1:000000000000:function:t",
                       Payload=b"[1, 2]", LogType="Tail")
    assert json.loads(again["Payload"].read())["args"] == [1, 2]
    assert "Init Duration" not in parse_report(base64.b64decode(again["LogResult"]).decode())


def test_the_client_context_reaches_the_handler_in_lambdas_shape(platform):
    with Client(platform.url, TOKEN) as c:
        c.deploy(fn("cc", handler="fns:client_context"))
    aws = lambda_client(platform.url)
    sent = {"client": {"installation_id": "i-1", "app_title": "bench"},
            "custom": {"round": 3}, "env": {"FAASRL_X": "1"}}
    resp = aws.invoke(FunctionName="cc", Payload=b"{}",
                      ClientContext=base64.b64encode(json.dumps(sent).encode()).decode())
    got = json.loads(resp["Payload"].read())
    assert got["custom"] == {"round": 3} and got["env"] == {"FAASRL_X": "1"}
    assert got["client"]["installation_id"] == "i-1" and got["client"]["app_title"] == "bench"
    assert got["client"]["app_version_code"] is None
    assert got["str"] == (  # what a handler's print shows: its fields, as AWS's runtime does
        "ClientContext(client=Client(installation_id='i-1', app_title='bench', "
        "app_version_name=None, app_version_code=None, app_package_name=None), "
        "custom={'round': 3}, env={'FAASRL_X': '1'})")
    assert got["context"].startswith("Context(invocation_id=") and "function_name='cc'" in \
        got["context"] and got["context"].endswith(f"client_context={got['str']})")
    assert json.loads(aws.invoke(FunctionName="cc", Payload=b"{}")["Payload"].read()) is None


@pytest.mark.parametrize("value", ["!!not base64!!", base64.b64encode(b"[1, 2]").decode(),
                                   base64.b64encode(b'{"custom": 5}').decode(),
                                   base64.b64encode(b"{not json").decode()])
def test_a_malformed_client_context_is_a_400(platform, value):
    aws = lambda_client(platform.url)
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="t", Payload=b"{}", ClientContext=value)
    assert err.value.response["Error"]["Code"] == "InvalidRequestContentException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_handler_errors_and_timeouts_come_back_as_function_errors(platform):
    aws = lambda_client(platform.url)
    resp = aws.invoke(FunctionName="boom", Payload=b'"x"')
    assert resp["StatusCode"] == 200 and resp["FunctionError"] == "Unhandled"
    err = json.loads(resp["Payload"].read())
    assert err["errorType"] == "ValueError" and err["errorMessage"] == "bad value: x"
    assert any("raise ValueError" in line for line in err["stackTrace"])

    resp = aws.invoke(FunctionName="slow", Payload=b'{"s": 5}')
    assert resp["FunctionError"] == "Unhandled"
    err = json.loads(resp["Payload"].read())
    assert err["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 0.50 seconds" in err["errorMessage"]


def test_event_and_dry_run(platform):
    aws = lambda_client(platform.url)
    resp = aws.invoke(FunctionName="t", InvocationType="Event", Payload=b'{"e": 1}')
    assert resp["StatusCode"] == 202
    request_id = resp["ResponseMetadata"]["RequestId"]
    rec = wait_for(lambda: (r := record(platform.url, request_id)) and r["status"] == "success"
                   and r, what="the event invocation to finish")
    assert rec["result"]["args"] == {"e": 1}

    assert aws.invoke(FunctionName="t", InvocationType="DryRun")["StatusCode"] == 204
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="t", InvocationType="Event", Payload=b"1" * (256 * 1024 + 1))
    assert err.value.response["Error"]["Code"] == "RequestTooLargeException"


def test_unknown_function_and_bad_input_are_lambda_errors(platform):
    aws = lambda_client(platform.url)
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="nope", Payload=b"{}")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "function:nope" in err.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="t", Qualifier="7", Payload=b"{}")
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="t", Payload=b"{not json")
    assert err.value.response["Error"]["Code"] == "InvalidRequestContentException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_bad_signatures_are_refused_with_403(platform):
    with pytest.raises(ClientError) as err:
        lambda_client(platform.url, secret="wrong").invoke(FunctionName="t", Payload=b"{}")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"
    with pytest.raises(ClientError) as err:
        lambda_client(platform.url, key_id="AKIDOTHER").invoke(FunctionName="t", Payload=b"{}")
    assert err.value.response["Error"]["Code"] == "UnrecognizedClientException"

    # Lambda's error shape on the wire; an unsigned request and a bearer token are not enough.
    url = f"{platform.url}/2015-03-31/functions/t/invocations"
    for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}):
        resp = httpx.post(url, content=b"{}", headers=headers)
        assert resp.status_code == 403 and "x-amzn-errortype" in resp.headers
        assert set(resp.json()) == {"Type", "message"} and resp.json()["Type"] == "User"


def test_a_body_changed_after_signing_is_refused(platform):
    aws = lambda_client(platform.url)

    def tamper(request, **_):
        request.body = b'{"x": 2}'

    aws.meta.events.register_last("before-send.lambda.Invoke", tamper)
    with pytest.raises(ClientError) as err:
        aws.invoke(FunctionName="t", Payload=b'{"x": 1}')
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"


def test_without_auth_the_api_is_open(make_platform):
    platform = make_platform()
    with platform.client() as c:
        c.deploy(fn("t"))
    resp = lambda_client(platform.url, secret="anything").invoke(FunctionName="t", Payload=b"3")
    assert json.loads(resp["Payload"].read())["args"] == 3


def test_boto3_publishes_versions_and_invokes_by_alias_with_a_canary(platform):
    aws = lambda_client(platform.url)
    first = aws.publish_version(FunctionName="t", Description="first")
    assert first["Version"] == "1" and first["FunctionArn"].endswith(":t:1")
    assert aws.publish_version(FunctionName="t")["Version"] == "1"  # unchanged: the same one
    with Client(platform.url, TOKEN) as c:
        c.deploy(fn("t", env={"STAGE": "two"}))
    assert aws.publish_version(FunctionName="t")["Version"] == "2"
    listed = aws.list_versions_by_function(FunctionName="t")["Versions"]
    assert [v["Version"] for v in listed] == ["$LATEST", "1", "2"]
    assert listed[2]["Environment"]["Variables"] == {"STAGE": "two"}

    alias = aws.create_alias(FunctionName="t", Name="live", FunctionVersion="1")
    assert alias["AliasArn"].endswith(":t:live") and alias["FunctionVersion"] == "1"
    with pytest.raises(ClientError) as exists:
        aws.create_alias(FunctionName="t", Name="live", FunctionVersion="2")
    assert exists.value.response["Error"]["Code"] == "ResourceConflictException"
    resp = aws.invoke(FunctionName="t", Qualifier="live", Payload=b"{}")
    assert resp["ExecutedVersion"] == "1"
    assert aws.invoke(FunctionName="t:2", Payload=b"{}")["ExecutedVersion"] == "2"

    updated = aws.update_alias(FunctionName="t", Name="live",
                               RoutingConfig={"AdditionalVersionWeights": {"2": 0.5}})
    assert updated["FunctionVersion"] == "1"
    assert updated["RoutingConfig"] == {"AdditionalVersionWeights": {"2": 0.5}}
    got = aws.get_alias(FunctionName="t", Name="live")
    assert got["FunctionVersion"] == "1" and got["RoutingConfig"] == updated["RoutingConfig"]
    executed = {aws.invoke(FunctionName="t", Qualifier="live", Payload=b"{}")["ExecutedVersion"]
                for _ in range(4)}
    assert executed == {"1", "2"}
    assert [a["Name"] for a in aws.list_aliases(FunctionName="t")["Aliases"]] == ["live"]
    aws.delete_alias(FunctionName="t", Name="live")
    with pytest.raises(ClientError) as gone:
        aws.invoke(FunctionName="t", Qualifier="live", Payload=b"{}")
    assert gone.value.response["Error"]["Code"] == "ResourceNotFoundException"
