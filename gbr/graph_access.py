"""The code graph's questions, answered by the package's daemon when one runs, else here.

The CLI and the MCP tools both come through `query`: the daemon holds the index file while
it runs (DuckDB lets one process in), and it answers from its warm connection.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gbr.core.errors import ConfigError
from gbr.core.graph.store import MAX_DEPTH, GraphReader

OPS = ("refs", "callers", "callees", "graph")
OnStale = Callable[[Any, str], None]


def answer(store: Any, op: str, name: str | None, depth: int = 1) -> dict[str, Any]:
    """One question against an open store: the object `gleambrctl OP --json` prints."""
    if not 1 <= depth <= MAX_DEPTH:
        raise ConfigError(f"--depth must be between 1 and {MAX_DEPTH}; got {depth}")
    reader = GraphReader(store)
    if op == "graph":
        reader.check()
        if not name:
            return reader.imports()
        module = reader.find_module(name)
        return reader.imports(module) if module else reader.neighbourhood(name, depth)
    if not name or not name.strip():
        raise ConfigError(f"`{op}` needs a name, like `wisp.set_cookie` or `map`")
    if op == "refs":
        return reader.refs(name)
    if op == "callers":
        return reader.callers(name, depth)
    if op == "callees":
        return reader.callees(name, depth)
    raise ConfigError(f"unknown graph question {op!r}; use one of {', '.join(OPS)}")


def query(
    db: Path, op: str, name: str | None, depth: int = 1, on_stale: OnStale | None = None
) -> tuple[dict[str, Any], str | None]:
    """(answer, indexed root): through the daemon serving `db` if any, else read locally."""
    from gbr.daemon.discovery import find_daemon

    info = find_daemon(db, on_stale=on_stale)
    if info is not None:
        from gbr.daemon.client import DaemonClient

        params = {"depth": str(depth)}
        if name:
            params["name"] = name
        with DaemonClient(info) as client:
            # The client's generic call: each route is a GET with the same parameters.
            return client._json("GET", f"/graph/{op}", params=params), info.root
    from gbr.core.snapshot import open_for_reading

    with open_for_reading(db) as store:
        return answer(store, op, name, depth), store.meta().get("root")
