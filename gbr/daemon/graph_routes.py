"""The code graph over HTTP: `/graph/refs`, `/graph/callers`, `/graph/callees`, `/graph/graph`.

GET routes with query parameters, answering the object `gleambrctl OP --json` prints (before
the CLI stamps it). They sit behind the same gate (Host, Origin, body cap) and token as
every route, and read the daemon's store, whose graph rows are written in the transaction
that writes a saved file's chunks: a caller list is as fresh as a search.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.params import Depends

from gbr.core.errors import GraphMissingError, IndexEmptyError, NameNotFoundError
from gbr.core.graph.model import MAX_DEPTH
from gbr.core.graph.questions import answer
from gbr.daemon.gate import error_response

Name = Annotated[
    str,
    Query(
        min_length=1,
        max_length=1000,
        description="Bare (`set_cookie`) or qualified (`wisp.set_cookie`, `gleam/list.map`).",
    ),
]
Depth = Annotated[int, Query(ge=1, le=MAX_DEPTH, description="How many calls away to follow.")]
_NOT_FOUND = {
    404: {"description": "No definition or reference has this name (with a hint)."},
    409: {"description": "An unknown name while the first pass still runs (`Retry-After`)."},
}


def add_graph_routes(
    app: FastAPI, daemon: Any, auth: list[Depends], errors: dict[Any, Any]
) -> None:
    """Add the routes; called by create_app before the gate learns the routes."""
    responses = {**errors, **_NOT_FOUND}

    def ask(op: str, name: str | None, depth: int = 1) -> Any:
        try:
            return answer(daemon.store, op, name, depth)
        except (NameNotFoundError, GraphMissingError, IndexEmptyError) as exc:
            if not daemon.first_pass.is_set():  # the graph fills as the first pass goes
                return error_response(
                    409,
                    f"the index is being built (the daemon's first pass over "
                    f"{daemon.config.root}); try again in a moment",
                    IndexEmptyError.__name__,
                    **{"retry-after": "5"},
                )
            if not isinstance(exc, NameNotFoundError):
                raise
            return error_response(404, str(exc), type(exc).__name__)

    @app.get("/graph/refs", dependencies=auth, responses=responses, tags=["graph"])
    def refs(name: Name) -> Any:
        """`refs --json`: where a name is defined and every reference to it, by position.
        An ambiguous bare name is a 400 listing the qualified candidates."""
        return ask("refs", name)

    @app.get("/graph/callers", dependencies=auth, responses=responses, tags=["graph"])
    def callers(name: Name, depth: Depth = 1) -> Any:
        """`callers --json`: who calls the name, breadth first to `depth`."""
        return ask("callers", name, depth)

    @app.get("/graph/callees", dependencies=auth, responses=responses, tags=["graph"])
    def callees(name: Name, depth: Depth = 1) -> Any:
        """`callees --json`: what the name calls, breadth first to `depth`."""
        return ask("callees", name, depth)

    @app.get("/graph/graph", dependencies=auth, responses=responses, tags=["graph"])
    def graph(name: Annotated[str | None, Query(max_length=1000)] = None, depth: Depth = 1) -> Any:
        """`graph --json`: the import graph, one module's imports, or a call neighbourhood."""
        return ask("graph", name, depth)
