"""An invocation record's JSON: what the API answers and Redis keeps."""

from __future__ import annotations

import dataclasses
import json

from faasrl.invoker.records import InvocationRecord


def test_the_json_holds_every_field_in_order_and_nothing_else():
    rec = InvocationRecord("i1", "echo", status="success", result={"x": [1, 2]}, cold=True,
                           cpu_s=0.25)
    rec.bill(0.0104)
    out = json.loads(rec.to_json())
    assert list(out) == [f.name for f in dataclasses.fields(InvocationRecord)]
    assert out == dataclasses.asdict(rec)
    assert out["billed_ms"] == 11 and out["result"] == {"x": [1, 2]}


def test_to_dict_is_a_copy():
    rec = InvocationRecord("i1", "echo")
    rec.to_dict()["status"] = "error"
    assert rec.status == "queued"
