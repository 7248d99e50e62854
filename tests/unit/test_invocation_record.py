"""An invocation record's JSON: what the API answers and Redis keeps."""

from __future__ import annotations

import dataclasses
import json

from faasrl.invoker.records import OFTEN_DEFAULT, InvocationRecord, from_stored


def test_the_json_holds_every_field_in_order_and_nothing_else():
    rec = InvocationRecord("i1", "echo", status="success", result={"x": [1, 2]}, cold=True,
                           cpu_s=0.25)
    rec.bill(0.0104)
    out = json.loads(rec.to_json())
    assert list(out) == [f.name for f in dataclasses.fields(InvocationRecord)]
    assert out == dataclasses.asdict(rec)
    assert out["billed_ms"] == 11 and out["result"] == {"x": [1, 2]}


def test_the_stored_form_leaves_out_defaults_and_reads_back_whole():
    rec = InvocationRecord("i1", "echo", status="success", result={"x": 1}, attempts=1,
                           run_s=0.001, billed_ms=1)
    stored = json.loads(rec.to_stored())
    assert "id" not in stored  # the key holds it
    assert not (set(OFTEN_DEFAULT) - {"result"}) & set(stored)  # at their defaults: left out
    assert from_stored("i1", rec.to_stored()) == json.loads(rec.to_json())
    assert list(from_stored("i1", rec.to_stored())) == list(json.loads(rec.to_json()))  # order
    for result in (0, False, "", []):  # equal to None? no: kept
        falsy = InvocationRecord("i2", "echo", status="success", result=result)
        assert from_stored("i2", falsy.to_stored())["result"] == result
        assert type(from_stored("i2", falsy.to_stored())["result"]) is type(result)
