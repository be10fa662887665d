"""A real daemon on the bookshelf example and Debian's chromium driven by Playwright.

The browser is Debian's (`make browser` installs it); Playwright's own browser download is
never used. Without chromium (or Playwright) the browser tests fail, naming the fix: `make test`
installs chromium first, and the tests always run.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from tests.conftest import EXAMPLE
from tests.daemon.conftest import RunningDaemon, clean_env, index_once, start_daemon
from tests.fake_llm import FakeLlm
from tests.web.chromium import CHROMIUM, launch

TOKEN = "web-page-token-5c1d"
KEY = "gsk-test-WEB-1234567890"
# A Gleam string holding markup: the page must show it as text, and never run it.
MARKUP_FILE = "src/bookshelf/markup.gleam"
MARKUP_SOURCE = """/// The banner of the admin page, as markup kept in a string.
pub fn banner_markup() -> String {
  "<script>window.__owned = 1</script><img src=x onerror=\\"window.__owned = 2\\">"
}
"""


def need_browser() -> None:
    """Skip (or, in CI, fail) when the browser or its driver is missing."""
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"Debian's chromium is not installed at {CHROMIUM}; `make browser` installs it"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "Playwright for Python is missing; `make install` installs the dev extras"
    if reason is None:
        return
    pytest.fail(f"{reason} (the browser tests always run: `make test` installs chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module's tests; each test opens its own context."""
    need_browser()
    from playwright.sync_api import sync_playwright

    driver = sync_playwright().start()
    try:
        launched = launch(driver)
        try:
            yield launched
        finally:
            launched.close()
    finally:
        driver.stop()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLlm]:
    with FakeLlm() as server:
        yield server


def bookshelf_copy(dest: Path) -> Path:
    """The whole bookshelf example, plus a file whose string holds markup."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".gbr", "build"))
    (dest / MARKUP_FILE).write_text(MARKUP_SOURCE, encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm, model: OnnxEmbedder
) -> Iterator[RunningDaemon]:
    """`serve` on the bookshelf with a token and the fake LLM as Groq."""
    base = tmp_path_factory.mktemp("web")
    root = bookshelf_copy(base / "bookshelf")
    env = clean_env(base / "home", GBR_TOKEN=TOKEN, **fake.env("groq", KEY))
    with indexed_daemon(root, env, model) as running:
        yield running


@contextmanager
def indexed_daemon(root: Path, env: dict[str, str], model: OnnxEmbedder) -> Iterator[RunningDaemon]:
    """`serve ROOT` with the token, once idle. `root` is indexed first in this process with
    the session's model, so the daemon's first pass finds every file unchanged: a daemon
    embeds on one thread, ten times slower."""
    index_once(root, root / ".gbr" / "index.duckdb", model)
    running = start_daemon(root, env=env, token=TOKEN)
    try:
        running.wait_idle()
        yield running
    finally:
        running.stop()


def page_url(daemon: RunningDaemon, query: dict[str, str] | None = None, hash: str = "") -> str:
    """A URL of the page carrying the token, as `serve` prints it."""
    params = {**(query or {}), "token": TOKEN}
    return f"{daemon.url}/?{urlencode(params)}{hash}"
