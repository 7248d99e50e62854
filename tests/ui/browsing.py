"""Reading the dashboard in the browser as a person does: wait for the text, find by CSS,
follow a link by its text, log in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers import wait_for

WAIT_S = 120.0


def until(browser: Any, what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """``check()`` once it is truthy; the page may redraw under it meanwhile, so a vanished
    or not-yet-there element is just not yet."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def attempt() -> Any:
        try:
            return check()
        except (NoSuchElementException, StaleElementReferenceException):
            return None
    return wait_for(attempt, timeout_s=timeout_s, what=f"the dashboard to show {what}",
                    poll_s=0.2)


def css(browser: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector)


def click_link(browser: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    until(browser, f"a link {text!r}",
          lambda: browser.find_element(By.LINK_TEXT, text).click() or True)


def log_in(browser: Any, url: str, key: str) -> None:
    """Open the dashboard and log in with ``key`` (the gateway's token or an API key)."""
    browser.get(url + "/ui/")
    until(browser, "the login form", lambda: css(browser, "#login").is_displayed())
    css(browser, "#token").send_keys(key + "\n")
    until(browser, "the login form gone", lambda: not css(browser, "#login").is_displayed())
