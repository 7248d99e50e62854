"""The dashboard in a real browser: a real platform (actor and learner processes, Redis), the
gateway's pages in headless Chromium, a job submitted through the API watched live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browsing import click_link, css, stray_text, until
from helpers import fn, wait_for

from faasrl.client import Client

pytestmark = pytest.mark.ui
TOKEN = "dashboard-test-token"
PLATFORM = {"register_builtins": True, "token": TOKEN}  # conftest's platform
# Long enough to be watched round by round (the test cancels it from the page); Nitro, so the
# rows carry a controller's decision details (its score) to chart.
JOB = {"name": "ui-cartpole", "env_id": "CartPole-v1", "envs_per_actor": 2,
       "steps_per_actor": 32, "evaluation_episodes": 2, "stop": {"max_rounds": 400},
       "controller": {"name": "nitro", "min_actors": 1, "max_actors": 3,
                      "hessian_samples": 64, "hessian_iterations": 8}}
CHARTS = ("chart-return-steps", "chart-return-time", "chart-actors", "chart-phases", "chart-cost")


def points(browser: Any, chart: str) -> int:
    return int(css(browser, f"#{chart}").get_attribute("data-points") or 0)


def test_dashboard_follows_a_job_and_shows_functions_and_invocations(
        browser: Any, client: Client, platform: Any, screenshots: Path, downloads: Path) -> None:
    client.deploy(fn("boom", "fns:boom"))
    assert client.invoke("boom", {"x": 1})["status"] == "error"  # a record with a traceback
    client.deploy(fn("greet", "fns:echo"))
    ok = client.invoke("greet", {"x": [1, 2]})
    assert ok["status"] == "success"

    # The gateway's root leads to the dashboard, which asks for the token.
    browser.get(platform.url + "/")
    assert browser.current_url == platform.url + "/ui/"
    until(browser, "the login form", lambda: css(browser, "#login").is_displayed())
    css(browser, "#token").send_keys("not-the-token\n")
    until(browser, "the wrong token refused",
          lambda: "refused" in css(browser, "#login-error").text)
    css(browser, "#token").send_keys(TOKEN + "\n")
    until(browser, "the (empty) jobs list", lambda: "No jobs yet" in
          css(browser, "#jobs-table").text)
    # The token is kept in this tab's session only, and never put in an address.
    assert browser.execute_script("return sessionStorage.getItem('faasrl.token')") == TOKEN
    assert TOKEN not in browser.current_url

    # A job submitted through the API appears; its page charts rounds as they arrive.
    job = client.submit(JOB)
    until(browser, "the job in the list", lambda: job["spec"]["name"] in
          css(browser, "#jobs-table").text)
    click_link(browser, job["spec"]["name"])
    until(browser, "the first round charted", lambda: points(browser, "chart-return-steps") >= 1)
    first = points(browser, "chart-return-steps")
    until(browser, "later rounds charted as they arrive",
          lambda: points(browser, "chart-return-steps") >= first + 2)
    until(browser, "every chart drawn", lambda: all(points(browser, c) for c in CHARTS))
    # How it shares the node: its priority, its part of the node against its fair part, its
    # actor-seconds and what it waited for capacity, per phase.
    sharing = until(browser, "the job's share of the node",
                    lambda: "(fair: " in (text := css(browser, "#job-sharing").text) and text)
    assert "priority\n1" in sharing and "waited for capacity\nactors " in sharing, sharing
    assert "learner " in sharing and "actor-seconds\n0\n" not in sharing, sharing
    # Every series names a column the gateway serves (GET /v1/jobs/columns).
    assert [css(browser, f"#{c}").get_attribute("data-unknown") for c in CHARTS] == [""] * 5
    series = css(browser, "#chart-cost").get_attribute("data-series").split("|")
    assert {"serverless", "serverful", "serverless, modeled parallel"} <= set(series)
    assert {"actors", "controller: score"} <= set(
        css(browser, "#chart-actors").get_attribute("data-series").split("|"))
    # What Nitro decided on is on the decision axis; the actors it wanted beside the actors;
    # its update counter k, which flattened the rest, nowhere.
    axes = dict(browser.execute_script(
        "return document.getElementById('chart-actors').data.map((t) => [t.name, t.yaxis])"))
    assert axes["controller: score"] == "y2" and axes["controller: wanted"] == "y", axes
    assert {n for n, a in axes.items() if a == "y2" and n.startswith("controller: ")} <= {
        "controller: score", "controller: ratio"}, axes
    assert css(browser, "#stream-state").text == "live"
    size = browser.get_window_size()
    browser.set_window_size(size["width"], 1750)  # every chart in the picture
    browser.save_screenshot(str(screenshots / "dashboard-job.png"))
    browser.set_window_size(size["width"], size["height"])

    # The metrics CSV downloads with the token; Cancel stops the job.
    css(browser, "#job-csv").click()
    csv = until(browser, "the metrics CSV downloaded",
                lambda: next(iter(downloads.glob(f"{job['id']}.csv")), None))
    assert "mean_return" in csv.read_text().splitlines()[0]
    css(browser, "#job-cancel").click()
    until(browser, "the job cancelled", lambda: "cancelled" in css(browser, "main h1").text)
    assert client.job(job["id"])["status"] == "cancelled"
    until(browser, "Resume enabled", lambda: css(browser, "#job-resume").is_enabled())

    # Functions: the built-in actor with its containers and figures; its own page.
    click_link(browser, "Functions")
    until(browser, "the functions", lambda: "actor" in css(browser, "#functions-table").text)
    until(browser, "node capacity", lambda: "used" in css(browser, "#capacity").text)
    until(browser, "memory and records", lambda: "ok (sheds past 90%)" in (
        text := css(browser, "#memory").text) and "in Redis" in text and "archived" in text)
    browser.save_screenshot(str(screenshots / "dashboard-functions.png"))
    click_link(browser, "actor")
    until(browser, "the actor's manifest", lambda: '"handler"' in css(browser, "#manifest").text)
    until(browser, "the actor's recent invocations",
          lambda: "success" in css(browser, "#function-invocations").text)

    # Invocations: filtered to errors, then one record with its traceback.
    click_link(browser, "Invocations")
    until(browser, "recent invocations", lambda: "learner" in
          css(browser, "#invocations-table").text)
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#filter-status")).select_by_value("error")
    until(browser, "only failed invocations", lambda: (
        t := css(browser, "#invocations-table").text) and "boom" in t and "success" not in t)
    Select(css(browser, "#filter-function")).select_by_value("boom")
    until(browser, "only boom's", lambda: (
        t := css(browser, "#invocations-table").text) and "boom" in t and "actor" not in t)
    css(browser, "#invocations-table a").click()
    until(browser, "the invocation's traceback",
          lambda: "ValueError" in css(browser, "#invocation-error").text)
    page = css(browser, "main").text
    assert "in boom\n    raise ValueError" in page  # the traceback, as the handler raised
    assert "cold (waited for a container start)" in page
    assert stray_text(browser) == [] and "Result" not in page, page
    browser.save_screenshot(str(screenshots / "dashboard-invocation.png"))

    # A successful invocation's page shows its result as JSON, then its (empty) logs.
    browser.get(f"{platform.url}/ui/#/invocations/{ok['id']}")
    until(browser, "the invocation's result",
          lambda: css(browser, "#invocation-result").text)
    assert css(browser, "#invocation-result").text == json.dumps(ok["result"], indent=2)
    page = css(browser, "main").text
    assert stray_text(browser) == [] and "[object" not in page and "Error" not in page, page
    assert page.endswith("Result\n" + json.dumps(ok["result"], indent=2)
                         + "\nLogs\nIt wrote nothing."), page

    # No script failed, and nothing was refused but the wrong token and the first look
    # without one (a policy violation, a missing file or a JavaScript error would be here).
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401 (Unauthorized)" in m for m in errors), errors


def test_a_functions_dead_letters_are_shown_and_redriven(browser: Any, make_platform) -> None:
    platform = make_platform(token=TOKEN, async_retry_base_s=0.1)
    with Client(platform.url, TOKEN) as client:
        client.deploy(fn("flaky", "fns:boom", maximum_retry_attempts=1))
        failed = client.invoke_async("flaky", {"x": 7})
        wait_for(lambda: client.dead_letters("flaky"), timeout_s=20, what="a dead letter")
        browser.get(platform.url + "/ui/")
        css(browser, "#token").send_keys(TOKEN + "\n")
        browser.get(f"{platform.url}/ui/#/functions/flaky")
        until(browser, "the dead letter", lambda: failed[:12] in css(browser, "#dead-letters").text)
        row = css(browser, "#dead-letters").text
        assert "RetriesExhausted" in row and "ValueError: bad value" in row and '{"x":7}' in row
        css(browser, "#redrive-all").click()
        until(browser, "the redrive said", lambda: "redrove 1 as new invocations" in
              css(browser, "#redrive-result").text)
        wait_for(lambda: [d["id"] for d in client.dead_letters("flaky")] not in ([], [failed]),
                 timeout_s=20, what="the redriven invocation to fail again")
