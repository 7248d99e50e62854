"""The dashboard shows what functions wrote: an invocation's page its logs, a function's page
its recent invocations' logs and its containers' own output."""

from __future__ import annotations

from typing import Any

import pytest
from browsing import css, stray_text, until
from helpers import fn

from faasrl.client import Client

pytestmark = pytest.mark.ui
TOKEN = "dashboard-logs-token"
PLATFORM = {"token": TOKEN}  # conftest's platform


def test_invocation_and_function_pages_show_their_logs(browser: Any, client: Client,
                                                       platform: Any) -> None:
    client.deploy(fn("chatty", "fns:chatty"))
    rec = client.invoke("chatty", {"tag": "shown"})
    logs = client.invocation_logs(rec["id"])
    assert "print shown" in logs

    browser.get(platform.url + "/ui/")
    until(browser, "the login form", lambda: css(browser, "#login").is_displayed())
    css(browser, "#token").send_keys(TOKEN + "\n")
    until(browser, "the jobs list", lambda: css(browser, "#jobs-table").text)

    browser.get(f"{platform.url}/ui/#/invocations/{rec['id']}")
    until(browser, "the invocation's logs", lambda: css(browser, "#invocation-logs").text)
    # What a person reads: the lines as written (the browser trims the last newline).
    assert css(browser, "#invocation-logs").text == logs.rstrip("\n")
    assert stray_text(browser) == []

    browser.get(f"{platform.url}/ui/#/functions/chatty")
    text = until(browser, "the function's logs", lambda: (
        t := css(browser, "#function-logs").text) and "print shown" in t and t)
    assert rec["id"][:12] in text and "success" in text
    assert "outside invocations" in text and "chatty imported" in text
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401 (Unauthorized)" in m for m in errors), errors
