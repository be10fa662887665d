"""`gleambrctl open`: the web page of the daemon already serving a package, in the browser.

`serve --open` opens the page of the daemon it starts; this finds a running one the way
every other command does (its `daemon.json`, checked against `/health`), so the page can be
opened again after its tab was closed, from any folder of the package.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gbr.commands.common import err, errors, note_stale, out
from gbr.commands.options import DbOption, DebugOption, JsonOption

BROWSER_WAIT = 10.0  # seconds; a browser command may only return when the browser quits


def open_page(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Package the daemon serves. [default: the nearest indexed package upwards]",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    print_url: Annotated[
        bool,
        typer.Option("--print", help="Print the page's address instead of opening it."),
    ] = False,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Open the web page of the daemon serving PATH in the default browser."""
    with errors(debug):
        from gbr.access.client import TOKEN_ENV
        from gbr.access.discovery import find_daemon
        from gbr.access.opening import index_file_for
        from gbr.commands import web_page
        from gbr.core.errors import DaemonError
        from gbr.core.paths import package_root

        root = package_root(path) if path is not None else None
        db_path = index_file_for(path, db, os.environ, Path.cwd())
        info = find_daemon(db_path, on_stale=note_stale)
        if info is None:
            raise DaemonError(
                f"no daemon serves {db_path}; start one with {_serve_hint(root, db_path, db)}"
            )
        token = os.environ.get(TOKEN_ENV, "").strip() or None
        if not info.token_required:
            token = None
        # The token goes into a printed address only on a terminal, never into a pipe or log.
        shown = web_page.page_url(info.url, token if _is_terminal() else None)
        if json_out:
            from gbr.commands.output import stamped

            report = {
                "url": shown,
                "pid": info.pid,
                "root": info.root,
                "token_required": info.token_required,
            }
            sys.stdout.write(json.dumps(stamped(report, info.root)) + "\n")
            return
        if print_url:
            out.print(escape(shown))
            return
        failures: list[str] = []
        opener = web_page.open_page(web_page.page_url(info.url, token), failures.append, shown)
        opener.join(BROWSER_WAIT)
        if failures:
            raise DaemonError(failures[0])
        asks = " (it asks for the token)" if info.token_required and token is None else ""
        err.print(f"[dim]opened {escape(web_page.page_url(info.url, None))}{asks}[/dim]")


def _serve_hint(root: Path | None, db_path: Path, db_given: Path | None) -> str:
    """The `serve` command that would serve this index, its paths quoted for a shell."""
    words = ["gleambrctl", "serve", str(root or db_path.parent.parent)]
    if db_given is not None:
        words += ["--db", str(db_path)]
    return "`" + shlex.join([*words, "--open"]) + "`"


def _is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False
