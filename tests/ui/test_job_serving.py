"""The job page says where the spec's serve rule published the policy, and links to the
function's page, which lists the versions and the alias that rolls it back."""

from __future__ import annotations

from typing import Any

from browsing import css, log_in, stray_text, until
from helpers import succeeded

from faasrl.client import Client

TOKEN = "job-serving-ui-token"
PLATFORM = {"register_builtins": True, "token": TOKEN}  # conftest's platform
JOB = {"name": "ui-serving", "env_id": "CartPole-v1", "envs_per_actor": 2,
       "steps_per_actor": 32, "evaluation_episodes": 0, "stop": {"max_rounds": 2},
       "controller": {"name": "fixed", "actors": 1},
       "serve": {"alias": "live", "every": 1, "name": "ui-served"}}


def test_the_job_page_links_the_served_alias_to_its_versions(browser: Any, client: Client,
                                                              platform: Any) -> None:
    job = succeeded(client, client.submit(JOB)["id"])
    assert job["serving"]["function_version"] == 2
    log_in(browser, platform.url, TOKEN)
    browser.get(f"{platform.url}/ui/#/jobs/{job['id']}")
    said = until(browser, "the serving line", lambda: (
        t := css(browser, "#job-serving").text) and "ui-served:live" in t and t)
    assert f"version 2 (model version {job['version']})" in said
    # The job page redraws every second: the link is found and clicked in one attempt.
    until(browser, "the link followed", lambda: css(browser, "#job-serving a").click() or True)
    aliases = until(browser, "the function's aliases", lambda: (
        t := css(browser, "#aliases-table").text) and "live" in t and t)
    assert "2" in aliases
    assert until(browser, "the versions", lambda: len(css(browser, "#versions-table")
                                                      .find_elements("css selector",
                                                                     "tbody tr"))) == 2
    assert stray_text(browser) == []
