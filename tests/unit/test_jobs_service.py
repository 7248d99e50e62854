"""A job's metrics as CSV (gateway/services/jobs.py)."""

from __future__ import annotations

import csv
import io
import json

from faasrl.gateway.services.jobs import metrics_csv


def test_csv_has_every_column_in_first_seen_order_and_lists_as_json():
    rows = [{"round": 0, "return": 9.5}, {"round": 1, "return": None, "actors": [2, 3]},
            {"round": 2, "info": {"a": 1}}]
    parsed = list(csv.DictReader(io.StringIO(metrics_csv(rows))))
    assert list(parsed[0]) == ["round", "return", "actors", "info"]
    assert [r["round"] for r in parsed] == ["0", "1", "2"]
    assert parsed[0]["actors"] == "" and parsed[1]["return"] == ""
    assert json.loads(parsed[1]["actors"]) == [2, 3]
    assert json.loads(parsed[2]["info"]) == {"a": 1}


def test_no_rows_is_an_empty_table():
    assert metrics_csv([]).strip() == ""
