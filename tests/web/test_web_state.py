"""The state bar while the daemon works: "indexing…" while a pass runs and "still embedding
N %" while its vectors fill, then neither; and "first pass: indexing…" before the first.

A real daemon is made to work by a real change: a saved file of a few thousand small
functions, whose chunks are written (and searchable) before their vectors, which a daemon
embeds on one thread for seconds. The test waits through the API until the pass is under
way with vectors missing, then loads the page: its first poll draws the state at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from tests.conftest import copy_small
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until
from tests.web.conftest import TOKEN, indexed_daemon, page_url

WAIT_MS = 20_000
FUNCTIONS = 600  # each its own chunk, each text distinct: no cache or dedup shortcut


def generated_module(count: int) -> str:
    return "".join(
        f"/// Step {i} of the generated table.\npub fn step_{i:05d}(x: Int) -> Int {{\n"
        f"  x * {i} + {count - i}\n}}\n\n"
        for i in range(count)
    )


@pytest.fixture
def working(tmp_path: Path, model: OnnxEmbedder) -> Iterator[RunningDaemon]:
    """`serve` on a copy of the small example, indexed beforehand: idle and healthy."""
    root = copy_small(tmp_path / "small")
    with indexed_daemon(root, clean_env(tmp_path / "home", GBR_TOKEN=TOKEN), model) as running:
        yield running


def state(daemon: RunningDaemon) -> dict[str, Any]:
    answer: dict[str, Any] = daemon.get("/web/state").json()
    return answer


def opened(browser: Any, daemon: RunningDaemon) -> tuple[Any, list[str]]:
    """A fresh tab on the page, its state drawn; and the script errors it will raise."""
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_url(daemon))
    page.wait_for_selector("#state .ok")
    return page, errors


def test_a_pass_shows_indexing_and_the_share_embedded_then_neither(
    browser: Any, working: RunningDaemon
) -> None:
    page, errors = opened(browser, working)
    idle = page.inner_text("#state")
    assert re.fullmatch(r"\d+ files · \d+ chunks · healthy", idle), idle

    (working.root / "src" / "generated.gleam").write_text(generated_module(FUNCTIONS))
    busy = wait_until(
        lambda: (s := state(working))["indexing"] and s["embedded"]["chunks"] < s["embedded"]["of"],
        "a pass writing the new chunks before their vectors",
    )
    assert busy
    page.reload()
    page.wait_for_function(
        "() => document.getElementById('state').textContent.includes('still embedding')"
    )
    shown = page.inner_text("#state")
    found = re.search(r"· still embedding (\d+) % · indexing… · healthy$", shown)
    assert found, shown
    assert 0 <= int(found.group(1)) < 100

    done = wait_until(
        lambda: (
            (s := state(working))["indexing"] is None
            and s["embedded"]["chunks"] == s["embedded"]["of"]
        ),
        "the pass to embed the new chunks",
        timeout=600,
    )
    assert done
    chunks = state(working)["chunks"]
    page.wait_for_function(  # the next poll, within its 4 s
        "n => document.getElementById('state').textContent.includes(`${n} chunks · healthy`)",
        arg=chunks,
    )
    assert "indexing" not in page.inner_text("#state")
    assert not errors, errors
    page.context.close()


def test_before_the_first_pass_ends_the_page_says_so(browser: Any, tmp_path: Path) -> None:
    root = copy_small(tmp_path / "small")
    (root / "src" / "generated.gleam").write_text(generated_module(FUNCTIONS))
    env = clean_env(tmp_path / "home", GBR_TOKEN=TOKEN)
    fresh = start_daemon(root, env=env, token=TOKEN)  # nothing indexed: it embeds it all
    try:
        assert not state(fresh)["ready"]
        context = browser.new_context()
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.goto(page_url(fresh))
        page.wait_for_function(
            "() => document.getElementById('state').textContent.includes('first pass')"
        )
        assert "first pass: indexing… · healthy" in page.inner_text("#state")
        context.close()
    finally:
        fresh.stop()
