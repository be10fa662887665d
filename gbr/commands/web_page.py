"""The web page's address as `serve` prints it, and opening it in the default browser."""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import urlencode


def page_url(base: str, token: str | None) -> str:
    """The page at `base`; with a token, a `?token=` link the page takes once and drops."""
    return f"{base}/?{urlencode({'token': token})}" if token else f"{base}/"


def open_page(url: str, note: Callable[[str], None], shown: str | None = None) -> threading.Thread:
    """Open `url` in the default browser (`BROWSER`, else what the desktop names) without
    holding up the caller: a browser command may not return until the browser quits.
    `note` hears why it failed, naming `shown` (`url` without its token, off a terminal)."""
    named = shown or url

    def run() -> None:
        import webbrowser

        try:
            opened = webbrowser.open(url, new=2)
        except Exception as exc:  # a broken BROWSER command: say so, serve on
            note(f"could not open a browser ({type(exc).__name__}: {exc}); open {named} yourself")
            return
        if not opened:
            note(f"no browser found to open the page; open {named} yourself (or set BROWSER)")

    thread = threading.Thread(target=run, name="gbr-open-page", daemon=True)
    thread.start()
    return thread
