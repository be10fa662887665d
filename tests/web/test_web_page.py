"""The web page in a real headless chromium, against a real daemon on the bookshelf example.

Each test opens its own browser context (its own sessionStorage, so its own token), and
fails on any script error the page raises. Waits are on what the page shows, with bounds.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import copy_small
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until
from tests.fake_llm import FakeLlm, Reply
from tests.web.conftest import MARKUP_FILE, TOKEN, page_url

WAIT_MS = 20_000  # a bound on what the page should show soon, not a target
SHOTS = os.environ.get("GBR_WEB_SCREENSHOTS")  # a folder to keep the README's pictures in


@pytest.fixture
def page(browser: Any, daemon: RunningDaemon) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 820})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=daemon.url)
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("dialog", lambda dialog: errors.append(f"a dialog opened: {dialog.message}"))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, errors


def screenshot(page: Any, tmp_path: Path, name: str) -> None:
    """A picture of the page; kept in GBR_WEB_SCREENSHOTS too when that is set."""
    shot = tmp_path / name
    page.screenshot(path=str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(SHOTS) / name)


def search(page: Any, query: str) -> None:
    """Type `query` key by key, as a person does, and wait for its hits."""
    box = page.locator("#q")
    box.fill("")
    box.press_sequentially(query, delay=15)
    page.wait_for_function("q => document.body.dataset.query === q", arg=query)


def in_view(page: Any, selector: str) -> bool:
    return bool(
        page.evaluate(
            """s => { const r = document.querySelector(s).getBoundingClientRect();
                return r.top >= 0 && r.bottom <= innerHeight; }""",
            selector,
        )
    )


# --- the token -----------------------------------------------------------------------------


def test_the_token_link_is_taken_and_dropped_from_the_address(
    page: Any, daemon: RunningDaemon
) -> None:
    page.goto(page_url(daemon))
    page.wait_for_selector("#examples li")
    assert "token" not in page.url
    assert page.evaluate("sessionStorage.getItem('gbr-token')") == TOKEN
    assert re.search(r"\d+ files · \d+ chunks · healthy", page.inner_text("#state"))


def test_without_the_token_the_page_asks_for_it_once(page: Any, daemon: RunningDaemon) -> None:
    page.goto(f"{daemon.url}/")
    page.wait_for_selector("#token-form:not([hidden])")
    page.fill("#token-input", TOKEN)
    page.press("#token-input", "Enter")
    page.wait_for_selector("#examples li")
    assert page.is_hidden("#token-form")


# --- search --------------------------------------------------------------------------------


def test_typing_a_query_shows_the_right_hit_first(
    page: Any, daemon: RunningDaemon, tmp_path: Path
) -> None:
    page.goto(page_url(daemon))
    search(page, "is_valid")
    first = page.locator(".hit").first
    assert first.locator(".loc").inner_text() == "src/bookshelf/isbn.gleam:51"
    assert first.locator(".name").inner_text() == "is_valid"
    assert first.locator(".tag").inner_text() == "function"
    assert "pub fn is_valid(input: String) -> Bool" in first.locator(".sig").inner_text()
    assert "valid ISBN-10 or ISBN-13" in first.locator(".doc").inner_text()
    assert "is_valid" in first.locator(".snip mark").all_inner_texts()
    assert "q=is_valid" in page.url
    screenshot(page, tmp_path, "web-search.png")


def test_only_the_last_keystroke_is_drawn(page: Any, daemon: RunningDaemon) -> None:
    page.goto(page_url(daemon))
    search(page, "parse")
    page.locator("#q").press_sequentially("_sort", delay=0)  # faster than the debounce
    page.wait_for_function("() => document.body.dataset.query === 'parse_sort'")
    page.wait_for_timeout(400)  # a stale answer arriving now must not replace it
    assert page.locator(".hit .name").first.inner_text() == "parse_sort"
    assert page.evaluate("document.body.dataset.query") == "parse_sort"


def test_filters_live_in_the_url(page: Any, daemon: RunningDaemon) -> None:
    query = {"q": "isbn", "mode": "bm25", "kind": "function", "path": "src/", "tests": "exclude"}
    page.goto(page_url(daemon, query))
    page.wait_for_function("() => document.body.dataset.query === 'isbn'")
    assert page.input_value("#mode") == "bm25" and page.input_value("#kind") == "function"
    assert page.input_value("#path") == "src/" and page.input_value("#tests") == "exclude"
    kinds = page.locator(".hit .tag").all_inner_texts()
    places = page.locator(".hit .loc").all_inner_texts()
    assert kinds and set(kinds) == {"function"}
    assert all(p.startswith("src/") for p in places)
    page.select_option("#kind", "type")
    page.wait_for_function("() => new URLSearchParams(location.search).get('kind') === 'type'")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.hit .tag')].every(t => t.textContent === 'type')"
    )
    assert "mode=bm25" in page.url and "tests=exclude" in page.url


def test_show_more_pages_the_hits(page: Any, daemon: RunningDaemon) -> None:
    page.goto(page_url(daemon, {"q": "book", "mode": "bm25"}))
    page.wait_for_function("() => document.querySelectorAll('.hit').length === 10")
    page.click("#more")
    page.wait_for_function("() => document.querySelectorAll('.hit').length > 10")


def test_the_empty_page_offers_examples_from_the_package(page: Any, daemon: RunningDaemon) -> None:
    page.goto(page_url(daemon))
    # The examples are drawn when their call answers, which may come after the load event.
    page.wait_for_function("() => document.querySelectorAll('#examples a.example').length >= 3")
    examples = page.locator("#examples a.example").all_inner_texts()
    assert len(examples) >= 3
    page.locator("#examples a.example").first.click()
    page.wait_for_function("q => document.body.dataset.query === q", arg=examples[0])
    assert page.input_value("#q") == examples[0]
    names = page.locator(".hit .name").all_inner_texts()
    assert examples[0] in names


def test_keys_move_open_and_copy(page: Any, daemon: RunningDaemon) -> None:
    page.goto(page_url(daemon, {"q": "is_valid"}))
    page.wait_for_function("() => document.body.dataset.query === 'is_valid'")
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("?")
    page.wait_for_selector("#keys[open]")
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    assert page.locator(".hit.sel").get_attribute("data-index") == "1"
    page.keyboard.press("k")
    assert page.locator(".hit.sel").get_attribute("data-index") == "0"
    page.keyboard.press("y")
    page.wait_for_selector("#toast:not([hidden])")
    link = f"{daemon.url}/?file=src%2Fbookshelf%2Fisbn.gleam#L51-L54"
    assert page.evaluate("navigator.clipboard.readText()") == link
    page.keyboard.press("Enter")
    page.wait_for_selector(".line.hl")
    assert page.url == link
    assert page.locator(".line.hl").first.get_attribute("id") == "L51"
    assert page.locator(".line.hl").count() == 4
    assert in_view(page, "#L51")


# --- the file view -------------------------------------------------------------------------


def test_the_file_view_lands_on_its_line_and_follows_a_caller(
    page: Any, daemon: RunningDaemon, tmp_path: Path
) -> None:
    page.goto(page_url(daemon, {"file": "src/bookshelf/isbn.gleam"}, "#L36"))
    page.wait_for_selector("#L36.hl")
    assert in_view(page, "#L36")
    assert page.locator("#L36 .t-keyword").first.inner_text() == "pub"
    assert "parse" in page.locator("#defs a").all_inner_texts()
    page.locator('#L36 a.sym[data-target="bookshelf/isbn.parse"]').click()
    callers = page.locator("#panel-callers li")
    callers.first.wait_for()
    assert "get_by_isbn" in callers.all_inner_texts()[0]
    assert "src/bookshelf/isbn.gleam:36" in page.inner_text("#panel-defs")
    assert "validate_isbn10" in page.inner_text("#panel-callees")
    screenshot(page, tmp_path, "web-file.png")
    site = callers.first.locator("a.site")
    where = site.inner_text()  # src/bookshelf/catalog.gleam:101
    path, line = where.rsplit(":", 1)
    site.click()
    page.wait_for_function("p => document.body.dataset.file === p", arg=path)
    page.wait_for_selector(f"#L{line}.hl")
    assert in_view(page, f"#L{line}")
    assert "isbn.parse" in page.inner_text(f"#L{line}")


def test_markup_in_indexed_code_is_shown_as_text(page: Any, daemon: RunningDaemon) -> None:
    page.goto(page_url(daemon, {"q": "banner_markup", "mode": "bm25"}))
    page.wait_for_function("() => document.body.dataset.query === 'banner_markup'")
    snippet = page.locator(".hit").first.inner_text()
    assert "<script>window.__owned = 1</script>" in snippet
    page.goto(page_url(daemon, {"file": MARKUP_FILE}, "#L3"))
    page.wait_for_selector("#L3.hl")
    assert "<script>window.__owned = 1</script><img src=x" in page.inner_text("#L3")
    assert page.locator("#L3 .t-string").count() == 1
    assert page.evaluate("window.__owned") is None
    assert page.locator("main script, main img").count() == 0


def test_the_call_graph_is_drawn_and_its_nodes_are_links(
    page: Any, daemon: RunningDaemon, tmp_path: Path
) -> None:
    page.goto(page_url(daemon, {"graph": "bookshelf/isbn.parse"}))
    page.wait_for_selector("svg#callgraph g.node.focus")
    screenshot(page, tmp_path, "web-graph.png")
    ids = page.locator("svg#callgraph g.node").evaluate_all("ns => ns.map(n => n.dataset.id)")
    assert {"bookshelf/catalog.get_by_isbn", "bookshelf/isbn.normalise"} <= set(ids)
    assert (
        page.locator(
            'path.edge[data-edge="bookshelf/catalog.get_by_isbn>bookshelf/isbn.parse"]'
        ).count()
        == 1
    )
    box_of = {i: page.locator(f'g.node[data-id="{i}"]').bounding_box() for i in ids}
    assert box_of["bookshelf/catalog.get_by_isbn"]["x"] < box_of["bookshelf/isbn.parse"]["x"]
    assert box_of["bookshelf/isbn.normalise"]["x"] > box_of["bookshelf/isbn.parse"]["x"]
    page.locator('g.node[data-id="bookshelf/isbn.normalise"]').click()
    page.wait_for_selector('svg#callgraph g.node.focus[data-id="bookshelf/isbn.normalise"]')
    assert "graph=bookshelf%2Fisbn.normalise" in page.url
    page.click("#graph-open")
    page.wait_for_selector(".line.hl")


# --- ask -----------------------------------------------------------------------------------


def test_an_answer_streams_with_citations_and_sources(
    page: Any, daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    text = (
        "Call `is_valid` with the text; it parses it with `parse` "
        "(src/bookshelf/isbn.gleam:51-54) and throws the error away."
    )

    def respond(body: Any) -> str:  # the answer to an answer's prompt; code to anything else
        first = body["messages"][0]["content"]
        return text if first.startswith("You answer questions") else "pub fn f() { 1 }"

    fake.respond = respond  # slow pieces, to see the answer before it is whole
    fake.script(*[Reply(None, chunks=10, chunk_delay=0.15)] * 8)
    page.goto(page_url(daemon, {"ask": ""}))
    page.wait_for_selector("#llm:has-text('answers from groq')")
    page.fill("#question", "how do I check that an ISBN is valid?")
    page.click("#ask-send")
    page.wait_for_function("() => (document.querySelector('.turn .a') || {}).textContent")
    partial = page.locator(".turn .a").inner_text()
    page.wait_for_function("() => document.body.dataset.answered === '2'")
    assert partial != text and text.startswith(partial)  # seen before it was whole
    answer = page.locator(".turn .a").first
    assert answer.inner_text() == text
    cite = answer.locator("a.cite")
    assert cite.get_attribute("href") == "/?file=src%2Fbookshelf%2Fisbn.gleam#L51-L54"
    assert "src/bookshelf/isbn.gleam:51" in page.locator(".turn .sources").inner_text()
    assert "answered by groq" in page.inner_text(".turn")
    asked = len(fake.requests)
    page.fill("#question", "and where is it called from?")
    page.click("#ask-send")
    page.wait_for_function("() => document.body.dataset.answered === '4'")
    screenshot(page, tmp_path, "web-ask.png")
    later = fake.requests[asked:]
    assert any("how do I check that an ISBN is valid?" in r.prompt for r in later)
    cite.click()
    page.wait_for_selector("#L51.hl")
    fake.respond = None


# --- what the page is allowed to do --------------------------------------------------------


def test_a_foreign_origin_or_host_gets_nothing(daemon: RunningDaemon) -> None:
    with httpx.Client(base_url=daemon.url, trust_env=False) as client:
        for path in ("/", "/static/main.js", "/web/examples"):
            foreign = client.get(path, headers={"origin": "http://evil.invalid"})
            assert foreign.status_code == 403 and "<" not in foreign.text
            rebound = client.get(path, headers={"host": "evil.invalid"})
            assert rebound.status_code == 403 and "<" not in rebound.text


def test_the_page_is_served_with_a_strict_policy(daemon: RunningDaemon) -> None:
    with httpx.Client(base_url=daemon.url, trust_env=False) as client:
        page = client.get("/")
        script = client.get("/static/main.js")
        kept = client.get("/static/main.js", headers={"if-none-match": script.headers["etag"]})
        changed = client.get("/static/main.js", headers={"if-none-match": '"other"'})
        assert client.get("/static/index.html").status_code == 404
        assert client.get("/static/..%2Fapp.py").status_code == 404
        data = client.get("/web/examples")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe" not in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert re.findall(r"<script[^>]*>", page.text) == [  # no inline script
        '<script type="module" async src="/static/api.js">',
        '<script type="module" src="/static/main.js">',
    ]
    assert "style=" not in page.text and "innerHTML" not in script.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert kept.status_code == 304 and kept.content == b""  # the browser's copy is current
    assert changed.status_code == 200 and changed.content == script.content
    assert kept.headers["content-security-policy"] == policy
    assert data.status_code == 401  # the page holds no data; its calls need the token


def test_the_file_route_refuses_paths_outside_the_package(daemon: RunningDaemon) -> None:
    (daemon.root.parent / "secret.gleam").write_text("pub fn secret() { 1 }\n")
    refused = {
        "../secret.gleam": 400,
        f"{daemon.root}/src/bookshelf.gleam": 400,
        "src/../../secret.gleam": 400,
        "src\\..\\..\\secret.gleam": 400,
        "gleam.toml": 404,
        "src/bookshelf/missing.gleam": 404,
    }
    with daemon.http() as client:
        for path, status in refused.items():
            response = client.get("/web/file", params={"path": path})
            assert response.status_code == status, (path, response.text)
            assert "secret()" not in response.text and response.json()["error"]
    shown = daemon.get("/web/file?path=src/bookshelf/isbn.gleam").json()
    assert shown["module"] == "bookshelf/isbn" and shown["lines"][35][0] == ["pub", "keyword"]


# --- serve --open, no provider, a dead daemon -----------------------------------------------


def test_serve_open_a_page_without_a_provider_and_a_dead_daemon(
    browser: Any, tmp_path: Path
) -> None:
    opened = tmp_path / "opened.txt"
    fake_browser = tmp_path / "browser.sh"
    fake_browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n')
    fake_browser.chmod(fake_browser.stat().st_mode | stat.S_IXUSR)
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home", GBR_TOKEN="tok-open-1", BROWSER=str(fake_browser))
    small = start_daemon(root, "--open", env=env, token="tok-open-1")
    try:
        wait_until(lambda: opened.exists() and opened.read_text(), "the browser command")
        assert opened.read_text() == f"{small.url}/?token=tok-open-1"
        assert f"web page: {small.url}/ (it asks for the token)" in small.log_text()
        assert "tok-open-1" not in small.log_text()
        small.wait_first_pass()
        context = browser.new_context()
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.goto(opened.read_text().replace("/?", "/?ask=&"))
        missing = page.locator("#llm-missing")
        missing.wait_for()
        assert "GROQ_API_KEY" in missing.inner_text()
        small.stop()
        page.wait_for_selector("#banner:not([hidden])", timeout=15_000)
        assert "not answering" in page.inner_text("#banner")
        context.close()
    finally:
        if small.proc.poll() is None:
            small.proc.kill()
            small.proc.wait(10)
