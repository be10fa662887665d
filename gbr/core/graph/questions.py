"""The code graph's questions against an open index: the object `gleambrctl OP --json`
prints. Every front door asks through `CodeIndex.graph`; the daemon answers the same
function from its warm connection.
"""

from __future__ import annotations

from typing import Any

from gbr.core.errors import ConfigError
from gbr.core.graph.model import MAX_DEPTH
from gbr.core.graph.store import GraphReader

OPS = ("refs", "callers", "callees", "graph")


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
