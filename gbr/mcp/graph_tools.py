"""The code graph as MCP tools: `find_references`, `callers`, `callees`.

Exact answers from the syntax trees, where `search_code` answers by likeness: an agent about
to change a definition lists what depends on it first. The text is `path:line:col` lines an
agent can open; the structured content is the `gleambrctl OP --json` object.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from gbr.access import CodeIndex
from gbr.core.graph.model import MAX_DEPTH

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
NameField = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1000,
        description="A function, type or constant: bare (`set_cookie`) or qualified "
        "(`wisp.set_cookie`, `gleam/list.map`). An ambiguous bare name returns the "
        "qualified candidates to choose from.",
    ),
]
DepthField = Annotated[
    int, Field(ge=1, le=MAX_DEPTH, description="1: direct only; 2: also their callers/callees...")
]


def add_graph_tools(
    server: MCPServer, index_for_call: Callable[[], AbstractContextManager[CodeIndex]]
) -> None:
    """Register the tools; `index_for_call` gives the CodeIndex for one call (the daemon's
    or this process's) and turns a GbrError into the tool's one-line error."""

    def ask(op: str, name: str, depth: int = 1) -> dict[str, Any]:
        with index_for_call() as index:
            return index.graph(op, name, depth)

    @server.tool(annotations=READ_ONLY)
    def find_references(name: NameField) -> CallToolResult:
        """Every place a Gleam function, type or constant is used, and where it is defined
        (path:line:col). Use it before renaming, removing or changing the signature of a
        definition, to find everything that must change with it: it is exact, where
        search_code finds look-alikes."""
        data = ask("refs", name)
        lines = [_head(data)] + [
            f"{r['path']}:{r['line']}:{r['col']} {r['kind']} in {_source(r)}"
            for r in data["references"]
        ]
        if not data["references"]:
            lines.append("no references in the index")
        return _result("\n".join(lines), data)

    @server.tool(annotations=READ_ONLY)
    def callers(name: NameField, depth: DepthField = 1) -> CallToolResult:
        """Which functions call this one (direct calls, pipes, captures, passed as a value),
        with each call site. Use it before changing what a function does or takes, to see
        who depends on it; depth 2 or more also lists the callers' callers."""
        return _calls(ask("callers", name, depth), "callers")

    @server.tool(annotations=READ_ONLY)
    def callees(name: NameField, depth: DepthField = 1) -> CallToolResult:
        """What a function calls, with each call site; calls into code outside the index
        (the standard library, dependencies not indexed) are marked external. Use it to
        learn what a function relies on before reading or changing it."""
        return _calls(ask("callees", name, depth), "callees")


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _head(data: dict[str, Any]) -> str:
    target = data["target"]
    name = f"{target['module']}.{target['name']}"
    if not target["internal"]:
        return f"{name} (external: not in the index)"
    where = ", ".join(
        f"{d['path']}:{d['line']}:{d['col']} {d['kind']}" for d in data["definitions"]
    )
    return f"{name} defined at {where}"


def _source(row: dict[str, Any]) -> str:
    return f"{row['module']}.{row['source']}" if row["source"] else f"module {row['module']}"


def _calls(data: dict[str, Any], way: str) -> CallToolResult:
    lines = [_head(data)]
    for entry in data[way]:
        external = " (external)" if not entry["internal"] else ""
        via = f" via {entry['via']}" if entry["depth"] > 1 else ""
        lines.append(f"{entry['module']}.{entry['name']}{external} [depth {entry['depth']}{via}]")
        lines += [f"  {s['path']}:{s['line']}:{s['col']} {s['kind']}" for s in entry["sites"]]
    if not data[way]:
        lines.append(f"no {way} in the index")
    return _result("\n".join(lines), data)
