"""`gleambrctl mcp` as an agent runs it: a subprocess spoken to over stdio by the SDK client.

One session sees the three situations an editor meets: no daemon (answered in-process),
a daemon started while the MCP server runs (which must be able to take the index file),
and the daemon gone again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import CTL, copy_small
from tests.daemon.conftest import (
    DEADLINE,
    RunningDaemon,
    append_function,
    clean_env,
    start_daemon,
)
from tests.mcp_server.conftest import text


async def search_names(client: Client, query: str) -> tuple[list[str], str]:
    result = await client.call_tool("search_code", {"query": query, "mode": "bm25", "k": 3})
    assert not result.is_error, text(result)
    return [r["name"] for r in result.structured_content["results"]], text(result)


async def until_found(client: Client, name: str) -> str:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        names, body = await search_names(client, name)
        if name in names:
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never became searchable through MCP")


def test_mcp_over_stdio_uses_the_daemon_while_it_runs(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = copy_small(tmp_path / "pkg")
    env = clean_env(tmp_path / "home")
    params = StdioServerParameters(command=CTL, args=["mcp", str(root)], env=env, cwd=str(root))

    async def steps() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            built = await client.call_tool("reindex", {})
            assert not built.is_error, text(built)
            assert built.structured_content["files_indexed"] > 0
            names, body = await search_names(client, "normalise")
            assert "normalise" in names and "in-process" in body

            # The MCP server holds no connection between calls, so a daemon can take the file.
            daemon = start_daemon(root, env=env)
            daemons.append(daemon)
            status = await client.call_tool("index_status", {})
            assert status.structured_content["pid"] == daemon.info.pid
            assert f"daemon pid {daemon.info.pid}" in text(status)

            append_function(root, "src/bookshelf/isbn.gleam", "mcp_fresh_from_the_daemon")
            body = await until_found(client, "mcp_fresh_from_the_daemon")
            assert f"daemon pid {daemon.info.pid}" in body

            assert daemon.stop() == 0
            names, body = await search_names(client, "mcp_fresh_from_the_daemon")
            assert names[0] == "mcp_fresh_from_the_daemon" and "in-process" in body

    asyncio.run(steps())
