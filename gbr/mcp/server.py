"""`gleambrctl mcp`: the index as Model Context Protocol tools, over stdio.

An agent reads the text of a tool result, and a program reads its structured content.
Both are given: the text is laid out as the Oracle's own context (a header naming the
function and file, then the code), and the structured content is the object the matching
`gleambrctl ... --json` command prints. An expected failure (no index yet, a bad filter, a
missing key) is a tool error whose one-line text says what to do next, never a crashed
server.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from gbr import __version__
from gbr.access import CodeIndex, Found, LlmChoice, LocalIndex, chosen
from gbr.access import request_fields as field
from gbr.access.choose import StaleNote
from gbr.access.requests import AskRequest, SearchRequest
from gbr.core.answer.limits import answer_cap, answer_deadline
from gbr.core.answer.oracle import AskOptions
from gbr.core.answer.prompt import render_chunk
from gbr.core.errors import GbrError, IndexEmptyError
from gbr.core.rank.priors import DEFAULT_TEST_POLICY
from gbr.core.rank.search import Filter
from gbr.core.records import Hit, Mode, Progress
from gbr.core.store.facade import damaged
from gbr.mcp.arguments import PlainErrorsServer
from gbr.mcp.graph_tools import add_graph_tools

INSTRUCTIONS = (
    "Search and ask about one Gleam package, indexed locally. Use search_code to find "
    "functions, types and constants by meaning or by name; it returns their code with "
    "path:line. Use ask_codebase for a cited answer from an LLM. Call reindex when the "
    "index is missing or old (a running `gleambrctl serve` keeps it fresh by itself)."
)
PROGRESS_EVERY = 0.5  # seconds between progress notifications during a reindex

IN_PROCESS = "in-process"  # where a call ran, when no daemon serves the index
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(
    local: LocalIndex, progress_every: float = PROGRESS_EVERY, on_stale: StaleNote | None = None
) -> MCPServer:
    """The tools over `local`, or over the daemon serving its index (chosen for each call)."""

    @contextlib.contextmanager
    def index_for_call(needs_index: bool = True) -> Iterator[CodeIndex]:
        with _tool_errors(local), chosen(local, on_stale) as index:
            if needs_index and not index.has_index():
                raise IndexEmptyError(
                    f"{index.root} has no index yet; call the reindex tool "
                    f"(or run `gleambrctl index {index.root}`)"
                )
            yield index

    server = PlainErrorsServer(
        "gleambrctl",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # stderr stays quiet unless something is wrong
    )

    @server.tool(annotations=READ_ONLY)
    def search_code(
        query: field.QueryText,
        k: field.SearchK = 8,
        mode: Annotated[
            Mode,
            Field(description="hybrid fuses meaning (dense) and words (bm25)."),
        ] = "hybrid",
        path: field.PathFilter = None,
        module: field.ModuleFilter = None,
        kinds: field.KindsFilter = [],  # noqa: B006 - pydantic copies defaults
        tests: field.Tests = DEFAULT_TEST_POLICY,
    ) -> CallToolResult:
        """Find code in the indexed Gleam package; returns each hit's code with path:line."""
        where = Filter(path=path, module=module, kinds=tuple(kinds), tests=tests)
        with index_for_call() as index:
            found = index.search(SearchRequest(query, k, mode, where))
            via = index.via or IN_PROCESS
        return _result(_hits_text(found, via), found.as_dict())

    @server.tool()
    def ask_codebase(
        question: field.QuestionText,
        k: field.AskK = 8,
        budget: field.Budget = 3000,
        rerank: Annotated[bool, Field(description="Fetch 30 candidates and rerank.")] = False,
        hyde: Annotated[
            bool | None,
            Field(description="Also search with a hypothetical snippet (default: automatic)."),
        ] = None,
        provider: field.ProviderName = None,
        model: field.ModelName = None,
        dry_run: Annotated[
            bool, Field(description="Return the prompt that would be sent; call no LLM.")
        ] = False,
        tests: field.Tests = DEFAULT_TEST_POLICY,
    ) -> CallToolResult:
        """Answer a question from the package's code with path:line citations (calls an LLM)."""
        options = AskOptions(
            max_chunks=k,
            budget=budget,
            rerank=rerank,
            hyde=hyde,
            dry_run=dry_run,
            tests=tests,
            deadline=answer_deadline(os.environ),
            max_answer_bytes=answer_cap(os.environ),
        )
        with index_for_call() as index:
            outcome = index.ask(AskRequest(question, options, LlmChoice(provider, model)))
        data = outcome.answer
        if outcome.error is not None:
            text = f"error: {outcome.error}\n\nThe context that was retrieved:\n\n" + _chunks_text(
                data["chunks"]
            )
            return _result(text, {**data, "exit_code": outcome.exit_code}, error=True)
        if dry_run:
            text = "\n\n".join(f"----- {m['role']} -----\n{m['content']}" for m in data["prompt"])
            return _result(text, data)
        return _result(_answer_text(data), data)

    @server.tool(annotations=READ_ONLY)
    def index_status() -> CallToolResult:
        """What is indexed: files, chunks, dropped files and why, and the daemon if one runs."""
        with index_for_call() as index:
            data = index.status()
            via = index.via or IN_PROCESS
        return _result(_status_text(data, via), data)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    async def reindex(ctx: Context) -> CallToolResult:
        """Index the package again: changed files are re-embedded, unchanged ones are kept."""
        last = 0.0
        loop = anyio.lowlevel.current_token()  # progress comes from the coordinator's thread

        def report(p: Progress) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last < progress_every:
                return
            last = now
            of = f" of {p.expected}" if p.expected is not None else ""
            message = f"{p.done}{of} files, {p.chunks} chunks"
            # A client that went away must not cost the index run its coordinator.
            with contextlib.suppress(Exception):
                anyio.from_thread.run(ctx.report_progress, p.done, p.expected, message, token=loop)

        def work() -> tuple[dict[str, Any], str]:
            with index_for_call(needs_index=False) as index:
                return index.index(progress=report).as_dict(), index.via or IN_PROCESS

        data, via = await anyio.to_thread.run_sync(work)
        return _result(_summary_text(data, via), data)

    add_graph_tools(server, index_for_call)
    return server


# --------------------------------------------------------------------------- rendering


def _result(text: str, data: dict[str, Any], error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=data, is_error=error
    )


@contextlib.contextmanager
def _tool_errors(local: LocalIndex) -> Iterator[None]:
    """A GbrError becomes a ToolError with its one line, and so does a damaged index file
    (a block's checksum fails mid-query); anything else stays a server bug."""
    try:
        yield
    except GbrError as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:
        bad = damaged(exc, local.db)
        if bad is None:
            raise
        raise ToolError(str(bad)) from None


def _hits_text(found: Found, via: str) -> str:
    if not found.hits:
        return f"No hits for {found.query!r} ({found.mode}, {via})."
    head = f"{len(found.hits)} hits for {found.query!r} ({found.mode}, {via}):\n\n"
    return head + "\n".join(render_chunk(hit.rank, hit) for hit in found.hits)


def _chunks_text(chunks: list[dict[str, Any]]) -> str:
    if not chunks:
        return "(nothing was retrieved)"
    return "\n".join(render_chunk(c["rank"], Hit.from_dict(c), c["text"]) for c in chunks)


def _answer_text(data: dict[str, Any]) -> str:
    sources = "\n".join(
        f"[{c['rank']}] {c['path']}:{c['start_line']}-{c['end_line']} {c['name']}"
        for c in data["chunks"]
    )
    text = f"{data['answer'].rstrip()}\n\nSources:\n{sources}"
    unknown = data.get("unknown_citations") or []
    if unknown:
        listed = ", ".join(f"{c['path']}:{c['line']}" for c in unknown)
        text += f"\n\nCited but not in the context sent (check these): {listed}"
    return text


def _status_text(data: dict[str, Any], via: str) -> str:
    lines = [
        f"index {data['db']} ({via})",
        f"root {data['root']}",
        f"files {data['files_ok']} indexed, {data['files_failed']} dropped; "
        f"chunks {data['chunks']} ({data['stale_chunks']} stale)",
    ]
    if "pid" in data:
        lines.append(
            f"daemon: watcher {data['watcher']}, {data['queue_depth']} queued, "
            f"indexing {data['indexing'] or 'nothing'}, {data['restarts']} restarts"
        )
    for item in data.get("dropped", []):
        lines.append(f"dropped {item['path']}: {item['error']}")
    for item in data.get("partial", []):
        lines.append(f"partial {item['path']}: {item['error']}")
    return "\n".join(lines)


def _summary_text(data: dict[str, Any], via: str) -> str:
    lines = [
        f"indexed {data['root']} ({via}) in {data['seconds']} s: "
        f"{data['files_indexed']} files indexed, {data['files_unchanged']} unchanged, "
        f"{data['files_removed']} removed, {data['files_dropped']} dropped; "
        f"{data['chunks']} chunks written"
        + (f", {data['chunks_in_index']} in the index" if data.get("chunks_in_index") else "")
    ]
    for item in data.get("dropped", []):
        lines.append(f"dropped {item['path']}: {item['reason']}")
    for item in data.get("partial", []):
        lines.append(f"partial {item['path']}: {item['reason']}")
    return "\n".join(lines)


def run_stdio(local: LocalIndex, on_stale: StaleNote | None = None) -> None:
    """Serve until the client closes stdin."""
    anyio.run(_serve_stdio, build_server(local, on_stale=on_stale))


async def _serve_stdio(server: MCPServer) -> None:
    """`MCPServer.run_stdio_async`, except that a line that is not a JSON-RPC message gets
    the JSON-RPC error it calls for (the SDK drops it, and the client waits forever)."""
    async with stdio_server() as (incoming, outgoing):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            async with send:
                async for item in incoming:
                    if isinstance(item, Exception):
                        await outgoing.send(SessionMessage(_line_error(item)))
                    else:
                        await send.send(item)

        lowlevel = server._lowlevel_server  # what run_stdio_async runs, with the same options
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(forward)
            await lowlevel.run(receive, outgoing, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


def _line_error(exc: Exception) -> JSONRPCError:
    """-32700 for a line that is not JSON, -32600 for JSON that is not a JSON-RPC message.
    The error carries the request's id when the line is an object with one (a request
    without a method, or with params that are not an object): the client waits on that id.
    It is null only when no id can be read, as the spec says."""
    not_json = isinstance(exc, ValidationError) and any(
        e["type"] == "json_invalid" for e in exc.errors(include_url=False)
    )
    error = (
        ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
        if not_json
        else ErrorData(
            code=INVALID_REQUEST, message="Invalid Request: the line is not a JSON-RPC 2.0 message"
        )
    )
    return JSONRPCError(jsonrpc="2.0", id=_request_id(exc), error=error)


def _request_id(exc: Exception) -> str | int | None:
    """The id of the object the validation refused, when it holds a valid one (a string
    or a number; true is no id). Each error of the refusal carries the object it read."""
    if not isinstance(exc, ValidationError):
        return None
    for problem in exc.errors(include_url=False):
        message = problem.get("input")
        if isinstance(message, dict) and "id" in message:
            found = message["id"]
            return found if isinstance(found, str | int) and not isinstance(found, bool) else None
    return None
