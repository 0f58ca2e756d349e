"""One headless Chromium for the suite, driven by Selenium through chromedriver: the export's
page (tests/capture/test_html.py) and the inspector (tests/inspector/test_browser.py) are
checked in it. Starting a browser costs seconds of CPU, so the session starts it once, on
first use, and quits it at the end, whatever the tests did; the modules that use it are one
of the GROUPS of tests/conftest.py, so that they run on one xdist worker and it starts once
there too.

Registered as a plugin by tests/conftest.py (its `browser` fixture is the suite's).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1280,900")

def needs_browser(what: str) -> pytest.MarkDecorator:
    """A browser test's mark (a test's decorator, or a module's `pytestmark`): skipped, with
    one reason, without Chromium and chromedriver. (Its module is in the group `browser` of
    tests/conftest.py's GROUPS, so that the browser starts once.)"""
    return pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                              reason="chromium and chromedriver are not installed (apt-get install -y chromium "
                                     f"chromium-driver); {what} is checked in a real headless browser")


class Browser:
    """The driver, with the few steps every browser test takes."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver

    def load(self, url: str) -> None:
        """The page loaded afresh (a new address that differs only after `#` would not be),
        once its script has drawn it (the page sets data-ready on <body>)."""
        self.driver.get("about:blank")
        self.driver.get(url)
        self.wait(lambda: self.body("data-ready") == "1")

    def body(self, name: str) -> str | None:
        value: str | None = self.js("return document.body && document.body.getAttribute(arguments[0])", name)
        return value

    def wait(self, condition: Callable[[], Any], seconds: float = 20) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, seconds, poll_frequency=0.05).until(lambda _: condition())

    def js(self, script: str, *args: Any) -> Any:
        """Read or act in one step (a page that redraws as data comes may replace an element
        found in one call before the next)."""
        return self.driver.execute_script(script, *args)

    def dom(self) -> str:
        """The document as the page's script left it, serialized as HTML (as `chromium
        --dump-dom` prints it, without the doctype)."""
        return str(self.js("return document.documentElement.outerHTML"))


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    assert CHROMIUM is not None and DRIVER is not None, "mark the test with tests.browser.needs_browser"
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (*ARGS, f"--user-data-dir={tmp_path_factory.mktemp('profile')}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
