"""Debian's chromium as the web page's tests and bench/web_page.py launch it.

Playwright drives it; Playwright's own browser download (`playwright install`) is never
used. `make browser` installs the package when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(driver: Any) -> Any:
    """A headless chromium from a started `sync_playwright()` driver."""
    return driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
