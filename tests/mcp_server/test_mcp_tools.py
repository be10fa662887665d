"""The MCP tools through the SDK's own client, connected in-process to the real server.

The index, the model and DuckDB are real; only the LLM is the fake server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.server import MCPServer

from gbr.access import LocalIndex, LocalSettings
from gbr.access.discovery import DaemonLock
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.facade import Store
from gbr.mcp.server import build_server
from tests.conftest import PROVIDER_VARS, write_tree
from tests.daemon.conftest import wait_until
from tests.fake_llm import FakeLlm, Reply
from tests.mcp_server.conftest import text

BROKEN = "src/bookshelf/oops.gleam"


@pytest.fixture
def package(small_example: Path) -> Path:
    return write_tree(small_example, {BROKEN: "pub fn oops( {\n"})


@pytest.fixture
def server(package: Path, model: OnnxEmbedder) -> MCPServer:
    settings = LocalSettings(package, package / ".gbr" / "index.duckdb")
    return build_server(LocalIndex(settings, lambda: model, env=os.environ), progress_every=0)


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def groq(fake_llm: FakeLlm, monkeypatch: pytest.MonkeyPatch, no_keys: None) -> FakeLlm:
    """Groq, and only Groq, pointed at the fake server: the in-process tools read os.environ."""
    for name, value in fake_llm.env("groq").items():
        monkeypatch.setenv(name, value)
    return fake_llm


def session(server: MCPServer, steps: Callable[[Client], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with Client(server) as client:
            return await steps(client)

    return asyncio.run(run())


def call(server: MCPServer, tool: str, **arguments: Any) -> Any:
    return session(server, lambda c: c.call_tool(tool, arguments))


def indexed(server: MCPServer) -> Any:
    result = call(server, "reindex")
    assert not result.is_error, text(result)
    return result


def test_the_four_tools_are_listed_with_their_schemas(server: MCPServer) -> None:
    tools = {t.name: t for t in session(server, lambda c: c.list_tools()).tools}
    assert set(tools) == {
        "search_code", "ask_codebase", "index_status", "reindex",
        "find_references", "callers", "callees",
    }  # fmt: skip
    search = tools["search_code"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["minLength"] == 1
    assert search["properties"]["mode"]["enum"] == ["hybrid", "dense", "bm25"]
    assert tools["search_code"].annotations.read_only_hint is True
    assert tools["reindex"].annotations.read_only_hint is False
    assert tools["ask_codebase"].input_schema["required"] == ["question"]


def test_before_any_index_the_read_tools_say_to_call_reindex(
    server: MCPServer, package: Path
) -> None:
    for tool, arguments in [("index_status", {}), ("search_code", {"query": "isbn"})]:
        result = session(server, lambda c, t=tool, a=arguments: c.call_tool(t, a))
        assert result.is_error
        assert "has no index yet; call the reindex tool" in text(result)
    assert not (package / ".gbr" / "index.duckdb").exists()  # reading created nothing


def test_reindex_reports_progress_and_the_dropped_file(server: MCPServer, package: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    result = session(server, lambda c: c.call_tool("reindex", {}, progress_callback=progress))
    assert not result.is_error, text(result)
    summary = result.structured_content
    gleam_files = len(list(package.rglob("*.gleam")))
    assert summary["files_indexed"] == gleam_files - 1
    assert [d["path"] for d in summary["dropped"]] == [BROKEN]
    assert f"dropped {BROKEN}: syntax error" in text(result)
    assert "(in-process)" in text(result)
    assert seen, "no progress notification arrived"
    done = [d for d, _, _ in seen]
    assert done == sorted(done)
    assert all(total is None or d <= total for d, total, _ in seen)
    assert all(m and "files" in m for _, _, m in seen)

    repeated = call(server, "reindex")
    again = repeated.structured_content
    assert again["files_indexed"] == 0
    assert again["files_unchanged"] == gleam_files - 1
    # Nothing written, and it says how much the index still holds: not an empty index.
    assert f"0 chunks written, {summary['chunks']} in the index" in text(repeated)


def test_search_returns_code_with_headers_and_the_search_json(server: MCPServer) -> None:
    indexed(server)
    result = call(server, "search_code", query="parse an isbn", k=3)
    assert not result.is_error
    data = result.structured_content
    assert set(data) == {"query", "mode", "results", "embedded"}
    assert data["embedded"]["chunks"] == data["embedded"]["of"] > 0
    assert data["mode"] == "hybrid" and len(data["results"]) == 3
    assert any(r["path"].endswith("isbn.gleam") for r in data["results"])
    body = text(result)
    first = data["results"][0]
    header = f"### [1] {first['name']} ({first['kind']}) · {first['path']}:{first['start_line']}"
    assert header in body
    assert "```gleam" in body and first["text"].splitlines()[0] in body


def test_search_filters_narrow_the_hits(server: MCPServer) -> None:
    indexed(server)
    types = call(server, "search_code", query="member", kinds=["type"], k=10)
    assert types.structured_content["results"]
    assert {r["kind"] for r in types.structured_content["results"]} == {"type"}
    under = call(server, "search_code", query="parse", path="test/", mode="bm25")
    assert under.structured_content["results"]
    assert all(r["path"].startswith("test/") for r in under.structured_content["results"])
    none = call(server, "search_code", query="zzqqxx", mode="bm25")
    assert none.structured_content["results"] == []
    assert text(none).startswith("No hits for 'zzqqxx'")


def test_search_and_ask_take_the_tests_policy(server: MCPServer) -> None:
    indexed(server)
    query = "parse an isbn and check the round trip"
    everything = call(server, "search_code", query=query, k=40, tests="include")
    assert any(r["path"].startswith("test/") for r in everything.structured_content["results"])
    library = call(server, "search_code", query=query, k=40, tests="exclude")
    hits = library.structured_content["results"]
    assert hits and not [r for r in hits if r["path"].startswith("test/")]
    asked = call(server, "ask_codebase", question=query, dry_run=True, tests="exclude")
    assert not asked.is_error, text(asked)
    assert not [c for c in asked.structured_content["chunks"] if c["path"].startswith("test/")]


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": ""},
        {"query": "isbn", "k": 0},
        {"query": "isbn", "k": 201},  # the limits every door shares (gbr.access.requests)
        {"query": "isbn", "mode": "fuzzy"},
        {"query": "isbn", "kinds": ["bogus"]},
        {"query": "isbn", "tests": "hide"},
        {},
    ],
)
def test_bad_arguments_are_tool_errors_and_the_server_goes_on(
    server: MCPServer, arguments: dict[str, Any]
) -> None:
    async def steps(client: Client) -> tuple[Any, Any]:
        bad = await client.call_tool("search_code", arguments)
        status = await client.call_tool("index_status", {})
        return bad, status

    bad, status = session(server, steps)
    assert bad.is_error
    assert "search_code" in text(bad)
    assert status.is_error and "reindex" in text(status)  # still answering


def test_status_is_the_status_json(server: MCPServer) -> None:
    summary = indexed(server).structured_content
    result = call(server, "index_status")
    assert not result.is_error
    data = result.structured_content
    assert data["files_ok"] == summary["files_indexed"]
    assert data["files_failed"] == 1
    assert data["chunks"] > 0
    assert [d["path"] for d in data["dropped"]] == [BROKEN]
    assert "in-process" in text(result) and f"dropped {BROKEN}" in text(result)


def test_ask_answers_with_sources_through_the_fake_llm(server: MCPServer, groq: FakeLlm) -> None:
    indexed(server)
    groq.script(Reply("`isbn.parse` cleans the text first (src/bookshelf/isbn.gleam:1)."))
    result = call(server, "ask_codebase", question="how is an isbn parsed?", hyde=False, k=4)
    assert not result.is_error, text(result)
    data = result.structured_content
    assert data["answer"].startswith("`isbn.parse` cleans the text first")
    assert data["provider"] == "groq" and 1 <= len(data["chunks"]) <= 4
    body = text(result)
    assert "Sources:" in body
    first = data["chunks"][0]
    assert f"[{first['rank']}] {first['path']}:{first['start_line']}" in body
    (request,) = groq.requests
    assert f"### [{first['rank']}] {first['name']}" in request.prompt


def test_ask_without_a_key_is_an_error_that_keeps_the_context(
    server: MCPServer, no_keys: None
) -> None:
    indexed(server)
    result = call(server, "ask_codebase", question="how is an isbn parsed?")
    assert result.is_error
    body = text(result)
    assert body.startswith("error: no LLM provider is configured")
    assert "The context that was retrieved:" in body and "### [1]" in body
    assert result.structured_content["exit_code"] == 3
    assert result.structured_content["chunks"]


def test_a_failing_provider_is_exit_code_4_with_the_context(
    server: MCPServer, groq: FakeLlm
) -> None:
    indexed(server)
    groq.script(Reply.error(401))
    result = call(server, "ask_codebase", question="how is an isbn parsed?", hyde=False)
    assert result.is_error
    assert result.structured_content["exit_code"] == 4
    assert "groq" in text(result).splitlines()[0]
    assert "test-key" not in text(result)


def test_a_dry_run_returns_the_prompt_and_calls_nothing(server: MCPServer, groq: FakeLlm) -> None:
    indexed(server)
    result = call(server, "ask_codebase", question="how is an isbn parsed?", dry_run=True)
    assert not result.is_error
    assert "----- system -----" in text(result) and "### [1]" in text(result)
    assert [m["role"] for m in result.structured_content["prompt"]] == ["system", "user"]
    assert groq.requests == []


def test_an_in_process_ask_lets_go_of_the_index_while_the_llm_answers(
    server: MCPServer, groq: FakeLlm, package: Path
) -> None:
    indexed(server)
    groq.script(Reply("one two three four five six", chunks=6, chunk_delay=0.4))
    results: list[Any] = []
    asking = threading.Thread(
        target=lambda: results.append(
            call(server, "ask_codebase", question="how is an isbn parsed?", hyde=False)
        )
    )
    asking.start()
    try:
        wait_until(lambda: groq.requests, "the question to reach the LLM", timeout=30)
        # Retrieval is over: a writer (a daemon, `gleambrctl index`) can take the file now.
        with Store.open(package / ".gbr" / "index.duckdb") as writer:
            writer.set_meta(probe="written while the LLM answered")
    finally:
        asking.join(60)
    (result,) = results
    assert not result.is_error, text(result)
    assert result.structured_content["answer"] == "one two three four five six"


def test_a_daemon_between_its_lock_and_its_discovery_file_gets_a_retry_hint(
    server: MCPServer, package: Path
) -> None:
    indexed(server)
    db = package / ".gbr" / "index.duckdb"
    lock = DaemonLock(db)
    lock.acquire()  # a daemon starting: locked and writing, not yet announced
    try:
        with Store.open(db):
            result = call(server, "search_code", query="isbn")
        assert result.is_error
        assert "a daemon is starting or stopping" in text(result)
        assert "try again in a moment" in text(result)
    finally:
        lock.release()
    assert not call(server, "search_code", query="isbn").is_error
