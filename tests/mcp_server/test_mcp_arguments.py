"""A tool called with bad arguments answers one plain line that names the field and the fix,
not pydantic's report with type codes and a URL."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from gbr.access import LocalIndex, LocalSettings
from gbr.mcp.server import build_server
from tests.mcp_server.conftest import text


def call(tmp_path: Path, tool: str, arguments: dict[str, Any]) -> Any:
    # Arguments are checked before the tool runs: no index and no model are needed.
    settings = LocalSettings(tmp_path, tmp_path / ".gbr" / "index.duckdb")
    server = build_server(LocalIndex(settings, lambda: None, env=os.environ))  # type: ignore[arg-type,return-value]

    async def run() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("tool", "arguments", "line"),
    [
        (
            "search_code",
            {"query": "isbn", "k": 201},
            "invalid arguments to search_code: k: should be less than or equal to 200 (got 201)",
        ),
        (
            "search_code",
            {"query": "isbn", "mode": "fuzzy"},
            "invalid arguments to search_code: mode: should be 'hybrid', 'dense' or 'bm25' "
            "(got 'fuzzy')",
        ),
        ("search_code", {}, "invalid arguments to search_code: query is required"),
        (
            "ask_codebase",
            {"question": "why?", "budget": 10, "k": 0},
            "invalid arguments to ask_codebase: k: should be greater than or equal to 1 (got 0); "
            "budget: should be greater than or equal to 200 (got 10)",
        ),
    ],
)
def test_an_argument_error_is_one_plain_line(
    tmp_path: Path, tool: str, arguments: dict[str, Any], line: str
) -> None:
    result = call(tmp_path, tool, arguments)
    assert result.is_error
    assert text(result) == line
    assert "pydantic" not in text(result) and "http" not in text(result)


def test_a_long_bad_value_is_cut_short(tmp_path: Path) -> None:
    result = call(tmp_path, "search_code", {"query": "isbn", "mode": "x" * 500})
    assert result.is_error and "\n" not in text(result)
    assert text(result).endswith("(got '" + "x" * 36 + "...)")  # 40 characters quoted
