"""A real headless Chromium driven by Selenium: Debian's ``chromium`` and ``chromium-driver``
(``deploy/browser.sh`` installs them), by their paths, so Selenium never looks for or
downloads a browser or a driver. Where they are missing, the tests skip, saying why."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW = (1400, 1000)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    """Keep each phase's report on the test, so the browser fixture knows a test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    """Where the browser saves what the dashboard downloads."""
    path = tmp_path / "downloads"
    path.mkdir()
    return path


@pytest.fixture
def screenshots(tmp_path: Path) -> Iterator[Path]:
    """Where a test saves its screenshots (the test artifacts); printed at the end."""
    path = tmp_path / "screenshots"
    path.mkdir()
    yield path
    print(f"\ndashboard screenshots: {path}")


@pytest.fixture
def browser(request: pytest.FixtureRequest, tmp_path: Path, downloads: Path
            ) -> Iterator[Any]:
    """The browser; after a failed test, what it showed is saved beside the test's files."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.common.exceptions import WebDriverException

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.skip(f"no {path}: run deploy/browser.sh (Debian's chromium and "
                        "chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER),
                                      log_output=str(tmp_path / "chromedriver.log"))
    try:
        driver = webdriver.Chrome(service=service, options=options)
    except WebDriverException as exc:
        pytest.skip(f"Chromium did not start ({exc.msg}); see {tmp_path / 'chromedriver.log'}")
    driver.set_page_load_timeout(60)
    yield driver
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        driver.save_screenshot(str(tmp_path / "failure.png"))
        (tmp_path / "failure.txt").write_text(
            driver.execute_script("return document.body.innerText"))
        print(f"\nthe page at the failure: {tmp_path / 'failure.png'}, {tmp_path / 'failure.txt'}")
    driver.quit()
