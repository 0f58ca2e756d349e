"""Take the two screenshots in docs/ again, from the demo's capture: the inspector with a
message open in its detail pane (inspector-screenshot.png), and the exported page
(export-screenshot.png). Needs Chromium, chromedriver and selenium (the test extra), as
the browser tests do.

    .venv/bin/python docs/screenshots.py

Run it when the page changes, so that what the docs show is what a newcomer sees.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
SIZE = (1280, 900)
PANED = (1600, 900)  # the inspector with its pane open: the list keeps its room


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        raise SystemExit("screenshots: needs chromium and chromedriver (apt-get install -y chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "captures"
        subprocess.run([sys.executable, "-m", "acp_bridge", "demo", "--dir", str(folder), "--no-color"],
                       check=True, stdout=subprocess.DEVNULL)
        capture = next(folder.glob("*.jsonl"))
        page = Path(scratch) / "page.html"
        subprocess.run([sys.executable, "-m", "acp_bridge", "export", str(capture), "--html", str(page)],
                       check=True, stderr=subprocess.DEVNULL)

        options = Options()
        options.binary_location = chromium
        for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={SIZE[0]},{SIZE[1]}", f"--user-data-dir={Path(scratch) / 'profile'}"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service(driver_path), options=options)

        def wait(condition: Callable[[], Any]) -> Any:
            return WebDriverWait(driver, 20, poll_frequency=0.05).until(lambda _: condition())

        def body(name: str) -> Any:
            return driver.execute_script("return document.body && document.body.getAttribute(arguments[0])", name)

        try:
            driver.get(page.as_uri())
            wait(lambda: body("data-ready") == "1")
            # From the sequence's heads down: the turns, arrows and rewrites, as the page's reader scrolls to.
            driver.execute_script("var h=document.querySelector('.heads'),top=document.getElementById('count')"
                                  ".getBoundingClientRect().bottom+12;"  # below the bar that stays on top
                                  "window.scrollTo(0,h.getBoundingClientRect().top+window.scrollY-top)")
            driver.save_screenshot(str(DOCS / "export-screenshot.png"))
            driver.set_window_size(*PANED)

            ui = subprocess.Popen([sys.executable, "-m", "acp_bridge", "ui", str(folder)], stdout=subprocess.PIPE)
            try:
                assert ui.stdout is not None
                url = ui.stdout.readline().decode().strip()
                driver.get(url)
                driver.get(url.split("?", maxsplit=1)[0] + f"#c={capture.name}")
                wait(lambda: body("data-live-ready") == "1")
                # The first prompt, rewritten by the system prompt rule: before and after in the pane.
                driver.execute_script(
                    "var rows=[...document.querySelectorAll('#list [id^=m]')];"
                    "var r=rows.find(x=>/session\\/prompt id \\d+ /.test(x.textContent)&&/rewrite|system/.test("
                    "x.textContent))||rows[4];r.querySelector('.sum').click()")
                wait(lambda: driver.execute_script("return !!document.querySelector('#pane .tree')"))
                driver.save_screenshot(str(DOCS / "inspector-screenshot.png"))
            finally:
                driver.get("about:blank")
                ui.send_signal(signal.SIGINT)
                ui.wait(timeout=20)
        finally:
            driver.quit()
    sys.stderr.write(f"screenshots: wrote {DOCS / 'export-screenshot.png'} and {DOCS / 'inspector-screenshot.png'}\n")


if __name__ == "__main__":
    main()
