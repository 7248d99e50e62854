"""What the Lambda backend reads from Lambda's answers: REPORT lines, errors, timeouts."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from faasrl.backends.aws_lambda import (
    CLIENT_CONTEXT_MAX,
    LambdaBackend,
    _read_response,
    client_context,
    parse_report,
)
from faasrl.backends.service import Outcome
from faasrl.manifest import FunctionSpec, NotOnLambda, renamed

# As AWS writes them (a cold start; a warm one).
COLD = ("START RequestId: 8f5 Version: $LATEST\nEND RequestId: 8f5\n"
        "REPORT RequestId: 8f5\tDuration: 102.25 ms\tBilled Duration: 1103 ms\t"
        "Memory Size: 1024 MB\tMax Memory Used: 80 MB\tInit Duration: 1000.12 ms\t\n")
WARM = "REPORT RequestId: 9a1\tDuration: 12.01 ms\tBilled Duration: 13 ms\tMemory Size: 512 MB\t"


def response(payload, function_error: str | None = None, log: str = "") -> dict:
    resp = {"StatusCode": 200, "Payload": json.dumps(payload).encode(),
            "LogResult": base64.b64encode(log.encode()).decode()}
    if function_error:
        resp["FunctionError"] = function_error
    return resp


def test_report_lines_give_billing_memory_and_cold_starts():
    assert parse_report(COLD) == {"Duration": 102.25, "Billed Duration": 1103,
                                  "Memory Size": 1024, "Max Memory Used": 80,
                                  "Init Duration": 1000.12}
    out = Outcome("error")
    _read_response(response({"ok": 1}, log=COLD), out, round_trip_s=2.0)
    assert (out.status, out.result, out.billed_ms, out.memory_mb) == ("success", {"ok": 1},
                                                                      1103, 1024)
    assert out.cold and out.init_s == pytest.approx(1.00012)
    assert out.run_s == pytest.approx(0.10225)
    warm = Outcome("error")
    _read_response(response(None, log=WARM), warm, round_trip_s=2.0)
    assert (warm.status, warm.billed_ms, warm.cold) == ("success", 13, False)


def test_what_the_function_wrote_is_the_tail_less_lambdas_own_lines():
    tail = ("INIT_START Runtime Version: python:3.11.v29\nSTART RequestId: 8f5 Version: "
            "$LATEST\nhello\n[INFO]\t2024-01-01T00:00:00Z\t8f5\tlogged\nEND RequestId: 8f5\n"
            + COLD.split("\n", 2)[2])
    out = Outcome("error")
    _read_response(response({"ok": 1}, log=tail), out, round_trip_s=2.0)
    assert out.logs == "hello\n[INFO]\t2024-01-01T00:00:00Z\t8f5\tlogged\n"
    assert out.billed_ms == 1103  # the REPORT line still read


def test_without_a_report_the_round_trip_is_billed():
    out = Outcome("error")
    _read_response(response([1]), out, round_trip_s=0.0421)
    assert (out.billed_ms, out.run_s, out.memory_mb) == (43, 0.0421, None)


def test_function_errors_and_both_timeout_shapes():
    out = Outcome("error")
    _read_response(response({"errorMessage": "bad", "errorType": "ValueError",
                              "stackTrace": ["  File \"h.py\"\n", "    raise\n"]},
                             "Unhandled", WARM), out, 0.1)
    assert out.status == "error" and out.error == {
        "type": "ValueError", "message": "bad", "traceback": "  File \"h.py\"\n    raise\n"}
    for payload in ({"errorMessage": "2026-11-22T10:00:00Z 8f5 Task timed out after 60.00 "
                                     "seconds"},
                    {"errorType": "Sandbox.Timedout", "errorMessage": "RequestId: 8f5 Error: "
                                                                      "Task timed out"}):
        out = Outcome("error")
        _read_response(response(payload, "Unhandled", WARM), out, 0.1)
        assert out.status == "timeout" and out.billed_ms == 13


def test_the_client_context_carries_the_runtime_env_within_lambdas_limit():
    assert client_context({}) is None
    value = client_context({"FAASRL_REDIS_URL": "rediss://:pw@h:6380/0"})
    assert json.loads(base64.b64decode(value)) == {"env": {"FAASRL_REDIS_URL":
                                                           "rediss://:pw@h:6380/0"}}
    with pytest.raises(ValueError, match="ClientContext"):
        client_context({"FAASRL_X": "x" * CLIENT_CONTEXT_MAX})


def test_manifest_placement_rules():
    spec = FunctionSpec(name="a", handler="h:m", aws_lambda={"function_name": "faasrl-a",
                                                             "qualifier": "live"})
    assert spec.placement == "local" and spec.aws_lambda.qualifier == "live"
    with pytest.raises(ValueError, match="aws_lambda"):
        FunctionSpec(name="a", handler="h:m", placement="lambda")
    with pytest.raises(ValueError, match="min_warm"):
        FunctionSpec(name="a", handler="h:m", placement="lambda", min_warm=1,
                     aws_lambda={"function_name": "x"})
    with pytest.raises(ValueError, match="endpoint_url"):
        FunctionSpec(name="a", handler="h:m", aws_lambda={"function_name": "x",
                                                          "endpoint_url": "ftp://x"})


def test_without_an_aws_lambda_section_a_function_says_it_cannot_run_on_lambda():
    """One check and one message for the job submit, the invoker and the backend, naming the
    function as its namespace does."""
    spec = FunctionSpec(name="a", handler="h:m", aws_lambda={"function_name": "faasrl-a"})
    assert spec.lambda_target().function_name == "faasrl-a"
    local = renamed(FunctionSpec(name="b", handler="h:m"), "lab-a.b")
    with pytest.raises(NotOnLambda, match=r"^'b' has no aws_lambda section"):
        local.lambda_target()
    out = asyncio.run(LambdaBackend().invoke(local, {}, 1.0))
    assert out.status == "error" and out.error["type"] == "NotOnLambda"
    assert out.error["message"].startswith("'b' has no aws_lambda section")


def test_job_placement_is_local_lambda_or_the_functions_own():
    from pydantic import ValidationError

    from faasrl.jobs.spec import JobSpec

    assert JobSpec.model_validate({"env_id": "CartPole-v1"}).placement.actors is None
    spec = JobSpec.model_validate({"env_id": "CartPole-v1", "placement": {"actors": "lambda"}})
    assert spec.placement.actors == "lambda"
    for bad in ({"actors": "gpu"}, {"learners": "lambda"}):
        with pytest.raises(ValidationError, match="placement"):
            JobSpec.model_validate({"env_id": "CartPole-v1", "placement": bad})
