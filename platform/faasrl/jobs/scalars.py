"""A metrics row as named scalars: what TensorBoard's event files hold of a round (Prometheus'
job gauges are a fixed few fields of the job's record, ``jobs/prometheus.py``).

A row's columns are named in :mod:`faasrl.round_row`; this module reads them from the row
itself, so a column added there reaches TensorBoard with no list to keep in step. Numbers
become scalars under their column's name; a column holding a mapping (the controller's
decision) becomes one scalar per numeric entry, ``column/entry``; text, lists and missing
values (``None``) are left out.
"""

from __future__ import annotations

from typing import Any

from faasrl import round_row as rr


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def row_scalars(row: dict[str, Any]) -> dict[str, float]:
    """The row's numeric columns by name (``column/entry`` inside a mapping column)."""
    out: dict[str, float] = {}
    for column, value in row.items():
        if _number(value):
            out[column] = float(value)
        elif isinstance(value, dict):
            out.update({f"{column}/{k}": float(v) for k, v in value.items() if _number(v)})
    return out


def row_step(row: dict[str, Any]) -> int:
    """The row's step: the job's env steps when its round ended."""
    return int(row[rr.TOTAL_ENV_STEPS])
