"""Bodies and headers of the gateway's Lambda Invoke API, in Lambda's own names and shapes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from faasrl.invoker.records import InvocationRecord
from faasrl.invoker.versions import LATEST

EXECUTED_VERSION = LATEST  # what runs without a qualifier
ACCOUNT_ID = "000000000000"  # the ARNs the local API names carry this account
EVENT_PAYLOAD_MAX = 256 * 1024  # Lambda's limit for asynchronous invocations


class LambdaErrorOut(BaseModel):
    """A refused request; its code is also in the ``x-amzn-ErrorType`` header (what boto3
    reads to raise, e.g., ``ResourceNotFoundException``)."""

    model_config = ConfigDict(populate_by_name=True)

    type: Literal["User", "Service"] = Field(alias="Type")
    message: str


class FunctionErrorOut(BaseModel):
    """The payload of an invocation whose handler failed (``X-Amz-Function-Error: Unhandled``)."""

    errorMessage: str
    errorType: str
    stackTrace: list[str] = Field(default_factory=list)


def function_arn(region: str, name: str) -> str:
    return f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{name}"


def function_error(rec: InvocationRecord, timeout_s: float) -> FunctionErrorOut:
    """Lambda's payload for an invocation that failed (its Invoke answer, a destination's
    ``responsePayload``)."""
    err = rec.error or {}
    if rec.status == "timeout":
        return FunctionErrorOut(
            errorType="Sandbox.Timedout",
            errorMessage=f"RequestId: {rec.id} Error: Task timed out after "
                         f"{timeout_s:.2f} seconds")
    trace = err.get("traceback") or ""
    return FunctionErrorOut(errorType=str(err.get("type", "Error")),
                            errorMessage=str(err.get("message", "")),
                            stackTrace=trace.splitlines(keepends=True))
