"""A function's page shows its published versions and its aliases with their routing."""

from __future__ import annotations

from typing import Any

import pytest
from browsing import css, log_in, stray_text, until
from helpers import fn

from faasrl.client import Client

pytestmark = pytest.mark.ui
TOKEN = "dashboard-versions-token"
PLATFORM = {"token": TOKEN}  # conftest's platform


def test_the_function_page_shows_versions_and_aliases(browser: Any, client: Client,
                                                      platform: Any) -> None:
    client.deploy(fn("served", env={"MODEL": "3"}))
    client.publish_version("served", "first model")
    client.deploy(fn("served", env={"MODEL": "4"}))
    client.publish_version("served")
    client.set_alias("served", "live", 1, canary={2: 0.1})

    log_in(browser, platform.url, TOKEN)
    browser.get(f"{platform.url}/ui/#/functions/served")
    versions = until(browser, "the versions", lambda: (
        t := css(browser, "#versions-table").text) and "MODEL=4" in t and t)
    assert "MODEL=3" in versions and "first model" in versions
    aliases = css(browser, "#aliases-table").text
    assert "live" in aliases and "version 2 at 10 %" in aliases
    assert stray_text(browser) == []
