"""`gleambrctl mcp`: the MCP server over stdio, answered by the daemon or in-process."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gbr.commands.common import (
    configure,
    errors,
    local_index,
    note_stale,
    package_root,
    start_telemetry,
)
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
        from gbr.core.paths import default_db
        from gbr.mcp.server import run_stdio

        root = package_root(path)
        db_path = (db or default_db(root)).resolve()
        start_telemetry(db_path)  # never echoed: stdout carries the protocol
        config = configure(root, db_path, include_deps=include_deps, max_file_size=max_file_size)
        local = local_index(config.local_settings(), model_dir, config.device)
        run_stdio(local, on_stale=note_stale)
