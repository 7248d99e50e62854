"""Every key a job owns lives under ``faasrl:job:<id>:``, so deleting a job deletes its data."""

from __future__ import annotations

import re

_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def job_prefix(job_id: str) -> str:
    if not _JOB_ID.match(job_id):
        raise ValueError(f"job id {job_id!r}: letters, digits, '-' and '_' only")
    return f"faasrl:job:{job_id}:"


def job_key(job_id: str, *parts: object) -> str:
    return job_prefix(job_id) + ":".join(str(p) for p in parts)
