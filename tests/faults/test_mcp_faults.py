"""`gleambrctl mcp` spoken to line by line over real stdio, with lines an SDK would not send.

Before: a line that is not JSON got no answer at all (the client waits forever), an
argument error was pydantic's several-line text with a documentation URL, and a damaged
index file was "Error executing tool search_code" with nothing to act on.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CTL, copy_small
from tests.daemon.conftest import DEADLINE, clean_env
from tests.faults.files_faults_helpers import garbage_in_the_middle, index_json

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "faults", "version": "1"},
    },
}


class RawMcp:
    """A `gleambrctl mcp` subprocess: write raw lines, read its JSON answers with a bound."""

    def __init__(self, root: Path, home: Path) -> None:
        self.proc = subprocess.Popen(
            [CTL, "mcp", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(home),
            cwd=root,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def send(self, line: str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = DEADLINE * 4) -> dict[str, Any]:
        try:
            return json.loads(self._lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(f"no answer from the MCP server within {timeout:g} s") from None

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )
        reply = self.answer()
        assert reply["id"] == request_id, reply
        return reply["result"]

    def close(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=DEADLINE * 2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


@pytest.fixture
def mcp(tmp_path: Path) -> Iterator[RawMcp]:
    root = copy_small(tmp_path / "pkg")
    index_json(root, home=tmp_path / "home")
    server = RawMcp(root, tmp_path / "home")
    server.send(INITIALIZE)
    assert server.answer()["id"] == 1
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield server
    server.close()


def test_lines_that_are_not_json_rpc_get_the_json_rpc_error_and_the_session_goes_on(
    mcp: RawMcp,
) -> None:
    mcp.send("this is not json")
    reply = mcp.answer()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    mcp.send('{"jsonrpc": "2.0", "id": 7, "method"')  # cut mid-object
    assert mcp.answer()["error"]["code"] == -32700

    mcp.send("[1, 2]")  # JSON, but no JSON-RPC message
    assert mcp.answer()["error"]["code"] == -32600

    result = mcp.call(2, "search_code", {"query": "isbn", "mode": "bm25", "k": 1})
    assert not result.get("isError"), result
    assert result["structuredContent"]["results"]


def test_an_invalid_request_with_an_id_gets_its_error_under_that_id(mcp: RawMcp) -> None:
    """Issue 32 item 14. JSON-RPC 2.0: the error's id is the request's, null only when it
    cannot be read. main answered these with `id: null`, so a client waiting on its id
    never heard back."""
    for request_id, line in [
        (11, {"jsonrpc": "2.0", "id": 11}),  # no method
        ("twelve", {"jsonrpc": "2.0", "id": "twelve", "method": "tools/list", "params": [1]}),
        (13, {"jsonrpc": "2.0", "id": 13, "method": "tools/list", "params": "x"}),
        (14, {"jsonrpc": "2.0", "id": 14, "method": 5}),
        (None, {"jsonrpc": "2.0", "id": True}),  # true is no id
        (None, {"jsonrpc": "2.0", "id": 1.5}),  # nor is a fraction, for this server
    ]:
        mcp.send(line)
        reply = mcp.answer()
        assert reply["id"] == request_id and reply["error"]["code"] == -32600, (line, reply)
    result = mcp.call(15, "search_code", {"query": "isbn", "mode": "bm25", "k": 1})
    assert result["structuredContent"]["results"]  # the session goes on


def test_bad_arguments_are_one_plain_line(mcp: RawMcp) -> None:
    result = mcp.call(3, "search_code", {"query": "", "k": 201})
    assert result["isError"]
    [block] = result["content"]
    message = block["text"]
    assert "\n" not in message and "pydantic" not in message and "http" not in message
    assert message.startswith("invalid arguments to search_code: ")
    assert "query:" in message and "k:" in message


def test_a_damaged_index_is_one_line_with_the_fix(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "pkg")
    index_json(root, home=tmp_path / "home")
    garbage_in_the_middle(root / ".gbr" / "index.duckdb")
    server = RawMcp(root, tmp_path / "home")
    try:
        server.send(INITIALIZE)
        server.answer()
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result = server.call(2, "search_code", {"query": "isbn", "mode": "bm25"})
    finally:
        server.close()
    assert result["isError"]
    [block] = result["content"]
    assert "is damaged" in block["text"] and f"gleambrctl index --rebuild {root}" in block["text"]
