"""The MCP tools find_references, callers and callees, through the SDK's own client connected
in-process to the real server, over a real index of the small example."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp.server import MCPServer

from gbr.access import LocalIndex, LocalSettings
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.mcp.server import build_server
from tests.graph.test_graph_index import CALLER
from tests.mcp_server.conftest import text
from tests.mcp_server.test_mcp_tools import call, session


@pytest.fixture
def server(small_example: Path, model: OnnxEmbedder) -> MCPServer:
    (small_example / "src" / "bookshelf" / "checker.gleam").write_text(CALLER)
    settings = LocalSettings(small_example, small_example / ".gbr" / "index.duckdb")
    built = build_server(LocalIndex(settings, lambda: model, env=os.environ), progress_every=0)
    assert not call(built, "reindex").is_error
    return built


def test_the_tools_say_when_to_use_them(server: MCPServer) -> None:
    tools = {t.name: t for t in session(server, lambda c: c.list_tools()).tools}
    assert "before renaming" in tools["find_references"].description
    assert "before changing" in tools["callers"].description
    assert tools["callers"].input_schema["properties"]["depth"]["maximum"] == 10
    assert tools["callees"].annotations.read_only_hint is True


def test_find_references_lists_positions_and_the_json_object(server: MCPServer) -> None:
    result = call(server, "find_references", name="isbn.is_valid")
    assert not result.is_error, text(result)
    lines = text(result).splitlines()
    assert lines[0].startswith("bookshelf/isbn.is_valid defined at src/bookshelf/isbn.gleam:")
    assert "src/bookshelf/checker.gleam:4:8 call in bookshelf/checker.check" in lines
    assert result.structured_content["target"]["internal"] is True


def test_callers_and_callees_with_depth(server: MCPServer) -> None:
    up = call(server, "callers", name="bookshelf/isbn.parse", depth=2)
    assert not up.is_error, text(up)
    names = [(c["name"], c["depth"]) for c in up.structured_content["callers"]]
    assert ("clean", 1) in names and ("check", 2) in names
    down = call(server, "callees", name="checker.clean")
    assert "bookshelf/isbn.parse [depth 1]" in text(down)


def test_an_unknown_name_is_a_tool_error_of_one_line(server: MCPServer) -> None:
    result = call(server, "callers", name="is_vaild")
    assert result.is_error
    assert text(result) == (
        "Error executing tool callers: "
        "no definition or reference named 'is_vaild'; did you mean is_valid?"
    )
