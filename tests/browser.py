"""Headless Chromium (Debian's `chromium` and `chromium-driver`, installed by setup.sh) driven
by selenium, for the preview tests and the README's screenshot:

    .venv/bin/netc preview examples/elman.py -o /tmp/elman.html
    .venv/bin/python tests/browser.py /tmp/elman.html docs/preview.png --click v8 --size 1400x900
    .venv/bin/python tests/browser.py /tmp/ls.html docs/preview-librispeech-search.png --fragment find=lstm2_bw
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# headless, and nothing that reaches for the network (this machine has none but loopback)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,800",
]


class Chromium:
    """One browser with a fresh profile; `quit()` ends it and removes the profile."""

    def __init__(self):
        for path in (CHROMIUM, CHROMEDRIVER):
            if not Path(path).exists():
                raise RuntimeError(f"{path} is missing: run setup.sh (it installs chromium and chromium-driver)")
        self.profile = tempfile.mkdtemp(prefix="netc_chromium_")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in [*FLAGS, f"--user-data-dir={self.profile}"]:
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # an explicit driver path: selenium then never tries to download one
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)

    def errors(self) -> list[str]:
        """The console's errors since the last call (uncaught exceptions included)."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]

    def quit(self) -> None:
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description="A screenshot of a netc preview page.")
    ap.add_argument("page", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--click", help="the id of a node to click first (e.g. v8)")
    ap.add_argument("--fragment", default="", help="the URL fragment to open the page with (e.g. at=81:14)")
    ap.add_argument("--size", default="1400x800", help="the window's width x height")
    args = ap.parse_args()
    browser = Chromium()
    try:
        browser.driver.set_window_size(*map(int, args.size.split("x")))
        browser.driver.get(args.page.resolve().as_uri() + (f"#{args.fragment}" if args.fragment else ""))
        if args.click:
            browser.driver.find_element("css selector", f"#view-returnn #r-{args.click}").click()
        browser.driver.save_screenshot(str(args.png))
    finally:
        browser.quit()


if __name__ == "__main__":
    main()
