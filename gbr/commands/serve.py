"""`gleambrctl serve`: the daemon that keeps a package indexed and answers over HTTP."""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from gbr.commands.common import errors
from gbr.commands.options import (
    DbOption,
    DebugOption,
    DeviceOption,
    EmbedCacheOption,
    FollowOutsideLinksOption,
    IncludeDepsOption,
    MaxFileSizeOption,
    ModelDirOption,
    PackageArgument,
)
from gbr.core.environ import FAULTS, PORT, TOKEN

if TYPE_CHECKING:
    from gbr.access.discovery import DaemonInfo


def serve(
    path: PackageArgument = Path("."),
    host: Annotated[
        str,
        typer.Option("--host", help="Interface to listen on; other than loopback needs --token."),
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help="Port; 0 picks a free one (printed). [default: GBR_PORT or 7717, or a free "
            "one (printed) when that is taken]",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=TOKEN.name,
            help="Clients must send `Authorization: Bearer TOKEN`.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    model_dir: ModelDirOption = None,
    debounce_ms: Annotated[
        int,
        typer.Option("--debounce-ms", min=0, help="Longest wait to group file changes."),
    ] = 200,
    json_logs: Annotated[
        bool | None,
        typer.Option(
            "--json-logs/--no-json-logs",
            help="Log to stderr as JSON lines, or as readable lines. [default: readable on a "
            "terminal, JSON otherwise]",
            show_default=False,
        ),
    ] = None,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    embed_cache: EmbedCacheOption = None,
    device: DeviceOption = None,
    follow_outside_links: FollowOutsideLinksOption = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Also answer requests whose Host is NAME (a proxy's name; repeatable; * for "
            "any). Loopback and --host always are.",
            metavar="NAME",
        ),
    ] = None,
    max_body: Annotated[
        str, typer.Option("--max-body", help="Largest request body read (e.g. 8MB).")
    ] = "8MB",
    open_browser: Annotated[
        bool,
        typer.Option("--open", help="Open the web page in the default browser once serving."),
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Keep PATH indexed as files change, and answer search, ask and index over HTTP."""
    with errors(debug):
        from gbr.access.opening import load_model, open_package, start_events
        from gbr.actors.faults import parse_faults
        from gbr.commands.web_page import open_page, page_url
        from gbr.core.errors import ConfigError
        from gbr.core.sizes import option_size
        from gbr.daemon.server import DEFAULT_PORT
        from gbr.daemon.server import serve as run_daemon
        from gbr.daemon.service import DaemonConfig

        package = open_package(
            path,
            db,
            os.environ,
            include_deps=include_deps,
            max_file_size=max_file_size,
            embed_cache=embed_cache,
            device=device,
        )
        root, db_path, settings = package.root, package.db.resolve(), package.config
        try:
            faults = parse_faults(os.environ.get(FAULTS.name))
        except ValueError as exc:
            raise ConfigError(f"{FAULTS.name}: {exc}") from None
        human = not json_logs if json_logs is not None else _is_terminal(sys.stderr)
        start_events(db_path, _warn, echo=True, human=human)
        config = DaemonConfig(
            root=root,
            db=db_path,
            host=host,
            port=port if port is not None else _default_port(DEFAULT_PORT),
            token=token or None,
            debounce_ms=debounce_ms,
            include_deps=settings.include_deps,
            max_bytes=settings.max_bytes,
            ignore=settings.ignore,
            follow_outside_links=follow_outside_links,
            faults=faults,
            embed_cache=settings.embed_cache,
            test_words=settings.test_words,
            env=settings.env,
        )

        def announce(info: DaemonInfo) -> None:
            # The token goes into the printed link only on a terminal, never into a log.
            shown = page_url(info.url, token if _is_terminal(sys.stdout) else None)
            asks = " (it asks for the token)" if token and shown == page_url(info.url, None) else ""
            with suppress(*_DEAD_STREAM):  # a pipe whose reader is gone: serve anyway
                out.print(
                    f"serving {escape(info.db)} at {info.url} (pid {info.pid}); Ctrl-C stops it"
                )
                out.print(f"web page: {escape(shown)}{asks}")
                sys.stdout.flush()
            if open_browser:
                open_page(page_url(info.url, token), note, shown)

        def note(message: str) -> None:
            with suppress(*_DEAD_STREAM):
                err.print(f"[dim]note: {escape(message)}[/dim]")

        code = run_daemon(
            config,
            lambda: load_model(model_dir, settings.env, settings.device),
            announce,
            note,
            allow_hosts=allow_host or (),
            max_body_bytes=option_size(max_body, "--max-body"),
            any_port_if_busy=port is None,
        )
        _quiet_dead_stdout()
        raise typer.Exit(code)


class _KeepServing(Console):
    """A console whose reader may leave: a closed pipe (`serve | head`) mutes it. rich's own
    answer to EPIPE is to exit the process, which stopped the daemon it had just announced."""

    def on_broken_pipe(self) -> None:
        self.quiet = True


out = _KeepServing(highlight=False, soft_wrap=True, emoji=False)
err = _KeepServing(stderr=True, highlight=False, soft_wrap=True, emoji=False)

# What writing to a gone stdout or stderr raises: EPIPE/EBADF, a closed file, or no stream
# at all (Python sets sys.stdout to None when descriptor 1 was closed at start).
_DEAD_STREAM = (OSError, ValueError, AttributeError)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def _quiet_dead_stdout() -> None:
    """Point stdout at /dev/null if its reader is gone (`serve | tee` after Ctrl-C), so that
    the flush at exit does not print a BrokenPipeError or turn the exit code into 120."""
    if sys.stdout is None:  # descriptor 1 was closed at start: nothing to flush
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with suppress(*_DEAD_STREAM):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def _default_port(builtin: int) -> int:
    """GBR_PORT, else the built-in one: the port tried first when --port is not given."""
    from gbr.core.errors import ConfigError

    text = PORT.text(os.environ)
    if not text:
        return builtin
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ConfigError(f"{PORT.name}={text!r} is not a port; set it to a number from 1 to 65535")
    return int(text)
