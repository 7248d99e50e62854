"""The dashboard with a namespace's key: it reads the API with the key it is given, so it
shows that namespace's functions and jobs only (headless Chromium, as test_dashboard.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from browsing import click_link, css, until
from helpers import fn, namespace_key, on_gateway

from faasrl.client import Client
from faasrl.jobs.spec import JobSpec
from faasrl.jobs.store import JobRecord

pytestmark = pytest.mark.ui
TOKEN = "dashboard-scoping-token"
PLATFORM = {"register_builtins": True, "token": TOKEN}  # conftest's platform


def test_a_namespace_keys_dashboard_lists_only_its_functions_and_jobs(
        browser: Any, client: Client, platform: Any) -> None:
    """The dashboard reads the API with the key it is given: a namespace's key sees its own."""
    _, key = namespace_key(platform, "lab-a")
    client.deploy(fn("root-fn", "fns:echo"))
    with Client(platform.url, key) as lab:
        lab.deploy(fn("lab-fn", "fns:echo"))

    async def save_jobs(services: Any) -> None:
        for job_id, name, namespace in (("rootjob00001", "root-job", "default"),
                                        ("labjob000001", "lab-job", "lab-a")):
            await services.jobs.store.save(JobRecord(
                id=job_id, spec=JobSpec(env_id="CartPole-v1", name=name), namespace=namespace,
                status="succeeded", created_at=time.time(), finished_at=time.time()))

    on_gateway(platform, save_jobs)
    browser.get(platform.url + "/ui/")
    until(browser, "the login form", lambda: css(browser, "#login").is_displayed())
    css(browser, "#token").send_keys(key + "\n")
    until(browser, "the namespace's job", lambda: "lab-job" in css(browser, "#jobs-table").text)
    assert "root-job" not in css(browser, "#jobs-table").text
    click_link(browser, "Functions")
    until(browser, "the namespace's function",
          lambda: "lab-fn" in css(browser, "#functions-table").text)
    functions = css(browser, "#functions-table").text
    assert "root-fn" not in functions and "actor" not in functions  # default's, built-ins too
