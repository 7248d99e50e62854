"""What follows a failed asynchronous attempt (pure), the manifest's fields for it, and the
record a destination gets."""

from __future__ import annotations

import pytest
from helpers import fn
from pydantic import ValidationError

from faasrl.gateway.async_events import (
    Event,
    GiveUp,
    Retry,
    after_failure,
    destination_record,
    too_old,
)
from faasrl.invoker.records import InvocationRecord
from faasrl.manifest import FunctionSpec

T0 = 1_000_000.0


def spec(**kw: object) -> FunctionSpec:
    return FunctionSpec.model_validate(fn("t", **kw))


def event(attempts: int) -> Event:
    return Event("e", "t", {"x": 1}, T0, [f"a{i}" for i in range(attempts)], T0)


def test_two_retries_by_default_each_backing_off_twice_as_long():
    s = spec()
    assert s.maximum_retry_attempts == 2 and s.maximum_event_age_s == 21600
    assert after_failure(s, event(1), T0 + 1, 60) == Retry(T0 + 61)
    assert after_failure(s, event(2), T0 + 62, 60) == Retry(T0 + 182)
    step = after_failure(s, event(3), T0 + 183, 60)
    assert isinstance(step, GiveUp) and step.condition == "RetriesExhausted"


def test_no_retry_with_maximum_retry_attempts_0():
    step = after_failure(spec(maximum_retry_attempts=0), event(1), T0, 60)
    assert isinstance(step, GiveUp) and step.condition == "RetriesExhausted"


def test_a_retry_due_past_the_maximum_age_is_not_planned():
    s = spec(maximum_event_age_s=100)
    assert after_failure(s, event(1), T0 + 39, 60) == Retry(T0 + 99)
    step = after_failure(s, event(1), T0 + 41, 60)
    assert isinstance(step, GiveUp) and step.condition == "EventAgeExceeded"
    assert too_old(s, event(1), T0 + 100) is None
    assert too_old(s, event(1), T0 + 101) is not None


@pytest.mark.parametrize("field, value", [
    ("maximum_retry_attempts", -1), ("maximum_retry_attempts", 3),
    ("maximum_event_age_s", 59), ("maximum_event_age_s", 21601),
    ("on_success", "a b"), ("on_failure", "t")])
def test_bad_fields_are_refused_by_name(field, value):
    with pytest.raises(ValidationError) as err:
        spec(**{field: value})
    assert {e["loc"][0] for e in err.value.errors()} == {field}


def test_destination_records_have_lambdas_shape():
    ev = event(3)
    ok = InvocationRecord("a2", "t", status="success", result={"r": 1})
    out = destination_record(ev, "arn:t", "Success", 3, ok, 5.0)
    assert out["requestContext"] == {"requestId": "e", "functionArn": "arn:t:$LATEST",
                                     "condition": "Success", "approximateInvokeCount": 3}
    assert out["requestPayload"] == {"x": 1} and out["responsePayload"] == {"r": 1}
    assert "functionError" not in out["responseContext"]
    timeout = InvocationRecord("a2", "t", status="timeout", error={"type": "Timeout"})
    out = destination_record(ev, "arn:t", "RetriesExhausted", 3, timeout, 5.0)
    assert out["responseContext"]["functionError"] == "Unhandled"
    assert out["responsePayload"]["errorType"] == "Sandbox.Timedout"
    out = destination_record(ev, "arn:t", "EventAgeExceeded", 0, None, 5.0)
    assert out["responsePayload"]["errorType"] == "EventAgeExceeded"
