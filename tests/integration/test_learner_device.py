"""Every algorithm's rows say where its learner ran (tests/gpu checks "cuda" on a GPU)."""

from __future__ import annotations

import pytest
from helpers import TINY_JOBS, succeeded, tiny_job

from faasrl.client import Client
from faasrl.round_row import LEARNER_DEVICE

PLATFORM = {"register_builtins": True}  # conftest's platform: with the built-in functions


@pytest.mark.parametrize("algorithm", sorted(TINY_JOBS))
def test_every_row_names_the_learners_device(client: Client, algorithm: str):
    job = client.submit(tiny_job(algorithm))
    succeeded(client, job["id"], timeout_s=240)
    assert [r[LEARNER_DEVICE] for r in client.job_metrics(job["id"])] == ["cpu", "cpu"]
