"""The dashboard's Namespaces page in a real browser: the gateway's token sees every namespace's
use against its quota and its spend, and their keys; a namespace's key sees its own only."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from browsing import click_link, css, log_in, until
from helpers import seed_job

from faasrl.client import Client
from faasrl.data.keys import spend_key

pytestmark = pytest.mark.ui
TOKEN = "namespaces-ui-token"
PLATFORM = {"token": TOKEN}  # conftest's platform


def row(browser: Any, table: str, first_cell: str) -> str:
    """The text of the row of ``table`` whose first cell is ``first_cell``."""
    from selenium.webdriver.common.by import By

    for tr in css(browser, f"#{table}").find_elements(By.CSS_SELECTOR, "tbody tr"):
        cells = tr.find_elements(By.TAG_NAME, "td")
        if cells and cells[0].text == first_cell:
            return tr.text
    return ""


def test_root_sees_every_namespace_and_a_key_its_own(
        browser: Any, client: Client, platform: Any, r: redis.Redis, screenshots: Path) -> None:
    client.create_namespace("lab-a", {"jobs": 1, "spend_usd_per_day": 2.0, "cores": 4.0})
    client.create_namespace("lab-b")
    seed_job(r, "lab-a-job", "lab-a", "running", 0.5)
    r.zadd(spend_key("lab-a"), {"lab-a-job:1:0.5": time.time()})  # its round, as billed
    reader = client.create_key("lab-a", "read", name="dashboard")
    admin = client.create_key("lab-a", "admin", name="lead")

    # The gateway's token: every namespace, its use against its quota, its spend.
    log_in(browser, platform.url, TOKEN)
    click_link(browser, "Namespaces")
    until(browser, "every namespace", lambda: all(
        row(browser, "namespaces-table", ns) for ns in ("default", "lab-a", "lab-b")))
    lab_a = row(browser, "namespaces-table", "lab-a")
    assert "1 of 1" in lab_a  # its running job, at its limit
    assert "$0.5000 of $2.0000" in lab_a and "0 of 4" in lab_a, lab_a
    assert "0, no limit" in row(browser, "namespaces-table", "lab-b")
    assert "root" in css(browser, "#whoami").text
    browser.save_screenshot(str(screenshots / "namespaces-root.png"))

    # One namespace's page: its quota and its keys, never a key itself.
    click_link(browser, "lab-a")
    until(browser, "lab-a's keys", lambda: row(browser, "keys-table", reader["id"]))
    assert "read" in row(browser, "keys-table", reader["id"])
    assert "lead" in row(browser, "keys-table", admin["id"])
    page = css(browser, "main").text
    assert "Namespace lab-a" in page and "spend (24 h)" in page
    assert reader["key"] not in page and admin["key"] not in page

    # A read key of lab-a: its namespace alone, and not its keys.
    css(browser, "#logout").click()
    log_in(browser, platform.url, reader["key"])
    click_link(browser, "Namespaces")
    until(browser, "lab-a", lambda: row(browser, "namespaces-table", "lab-a"))
    table = css(browser, "#namespaces-table").text
    assert "default" not in table and "lab-b" not in table, table
    assert f"key {reader['id']} (read) of namespace lab-a" in css(browser, "#whoami").text
    assert css(browser, "main h1").text == "Namespace lab-a"
    click_link(browser, "lab-a")
    until(browser, "the keys refused to a read key",
          lambda: "Only the namespace's admin keys" in css(browser, "#keys").text)
    browser.save_screenshot(str(screenshots / "namespaces-key.png"))
    # Another namespace's page is not found for it.
    browser.get(f"{platform.url}/ui/#/namespaces/lab-b")
    until(browser, "lab-b not found", lambda: "404" in css(browser, "main").text)

    # No script failed; refused were only the first look without a token, the read key's
    # look at the keys and at lab-b.
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all(re.search(r"40[134] \((Unauthorized|Forbidden|Not Found)\)", m)
               for m in errors), errors
