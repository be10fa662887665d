"""`gleambrctl mcp`: the MCP server over stdio, answered by the daemon or in-process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gbr.commands.common import errors, note_stale, warn
from gbr.commands.options import (
    DbOption,
    DebugOption,
    IncludeDepsOption,
    MaxFileSizeOption,
    ModelDirOption,
)

if TYPE_CHECKING:
    pass


def mcp(
    path: Annotated[Path, typer.Argument(help="The Gleam package to serve.")] = Path("."),
    db: DbOption = None,
    model_dir: ModelDirOption = None,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    debug: DebugOption = False,
) -> None:
    """Serve search_code, ask_codebase, index_status and reindex to an MCP client over stdio.

    Each call goes to the running `gleambrctl serve` for this index when there is one, and is
    answered in this process otherwise.
    """
    with errors(debug):
        from gbr.access.opening import open_package, start_events
        from gbr.mcp.server import run_stdio

        package = open_package(
            path,
            db.resolve() if db is not None else None,
            os.environ,
            include_deps=include_deps,
            max_file_size=max_file_size,
        )
        start_events(package.db, warn)  # never echoed: stdout carries the protocol
        run_stdio(package.local(model_dir), on_stale=note_stale)
