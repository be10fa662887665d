"""Tool argument errors as one plain line, not pydantic's report with a docs URL.

An agent reads the error to fix its call: `k must be at most 50 (got 51)` is enough, and
pydantic's several lines (type codes, input repr, "For further information visit
https://errors.pydantic.dev/...") are noise to it and to a person reading a log.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

_SHOWN_INPUT = 40  # characters of a rejected value quoted back


def argument_errors(tool: str, error: ValidationError) -> str:
    """`invalid arguments to TOOL: field: problem (got VALUE); ...` on one line."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        message = " ".join(str(item["msg"]).split())
        message = message[:1].lower() + message[1:]
        message = message.removeprefix("input ")  # "should be ..." after the field name
        if item["type"] == "missing":
            problems.append(f"{where} is required")
            continue
        got = repr(item.get("input"))
        if len(got) > _SHOWN_INPUT:
            got = got[: _SHOWN_INPUT - 3] + "..."
        problems.append(f"{where}: {message} (got {got})")
    return f"invalid arguments to {tool}: " + "; ".join(problems)


class PlainErrorsServer(MCPServer):
    """MCPServer whose argument validation errors read as one line."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argument_errors(name, exc.__cause__)) from exc.__cause__
            raise
