"""`gleambrctl`: the typer app. It declares the commands; their bodies live in gbr/commands/,
one module per concept.

Heavy imports (onnxruntime, duckdb, pykka) happen inside the commands, so `--help` is instant
and a cold `search` pays only for what it uses.
"""

from __future__ import annotations

import atexit
import copy
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from gbr.commands import (
    ask,
    chat,
    coercion,
    graph,
    index,
    mcp,
    models,
    search,
    serve,
    settings,
    status,
)
from gbr.commands.common import out
from gbr.commands.open_page import open_page

# Plain option values without pydantic: 65-70 ms of a cold search (gbr/commands/coercion.py).
coercion.install()


class _Gleambrctl(typer.Typer):
    """The app, which builds only the command it is asked to run.

    typer makes the click command of every registered command (their parameters, their
    annotations read) before it parses anything: 36-44 ms of a cold `search` for all
    twelve, against 2-8 ms for one (in-process, a loaded machine). When the first argument
    names a command, the others are left out; anything else (no command, an option first,
    an unknown name, shell completion) gets them all, so the app's own help, its errors
    and completion are unchanged.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("args", args[0] if args else None)
        if given is None:
            _refuse_undecodable(sys.argv[1:])
        only = self._named(sys.argv[1:] if given is None else list(given))
        if only is None:
            return super().__call__(*args, **kwargs)
        narrowed = copy.copy(self)
        narrowed.registered_commands = [only]
        if given is not None or only.callback not in _QUICK_EXIT:
            return typer.Typer.__call__(narrowed, *args, **kwargs)
        try:
            return typer.Typer.__call__(narrowed, *args, **kwargs)
        except SystemExit as done:
            _exit_now(done)
            raise

    def _named(self, argv: Sequence[str]) -> Any:
        """The registered command that `argv` starts with, if that is all it needs."""
        if not argv or argv[0].startswith("-") or _COMPLETE_ENV in os.environ:
            return None
        for info in self.registered_commands:
            name = info.name or typer.main.get_command_name(info.callback.__name__)  # type: ignore[union-attr]
            if name == argv[0]:
                return info
        return None


def _refuse_undecodable(argv: Sequence[str]) -> None:
    """Exit 2 with one line when an argument is not UTF-8 (`search $'fines \\xff'`).

    Python hands such bytes over as lone surrogates, which no output, tokenizer or query can
    encode: each command failed with a traceback somewhere deep inside."""
    for number, arg in enumerate(argv, start=1):
        if undecodable(arg):
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            sys.stderr.write(
                f"error: argument {number} ('{shown}') is not valid UTF-8; "
                "pass names and questions as UTF-8 text\n"
            )
            raise SystemExit(2)


def undecodable(text: str) -> bool:
    """Whether `text` holds bytes that were not UTF-8 (lone surrogates, from surrogateescape)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


# Set by the shell while it asks for completions, which must list every command.
_COMPLETE_ENV = "_GLEAMBRCTL_COMPLETE"

# Commands that leave nothing for the interpreter to finish once they return: they have
# closed the index and written their output, and no thread of theirs is still working.
_QUICK_EXIT = {search.search}


def _exit_now(done: SystemExit) -> None:
    """End the process as `done` would, without the interpreter's own teardown.

    Once a cold `search` has printed its hits, Python's finalisation (onnxruntime's and
    DuckDB's native teardown, every module freed) took longer than the ranking: normal
    exit vs os._exit after the same work, 0.33-0.76 s vs 0.02-0.06 s with onnxruntime
    loaded and 0.19-0.46 s vs 0.01-0.10 s with DuckDB (one process each, a loaded machine).
    Output is flushed and atexit handlers run first; anything unusual (a message as the
    exit code, a stream that cannot be flushed) is left to the normal exit.
    Only for the console script (`app()` reading sys.argv), never when `app` is called
    with arguments, as tests and embedders do.
    """
    code = done.code
    if code is not None and not isinstance(code, int):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # a closed pipe or stream: Python reports it as it always does
    atexit._run_exitfuncs()
    os._exit(code or 0)


app = _Gleambrctl(
    name="gleambrctl",
    help="Index a Gleam package locally and search it by meaning and by name.",
    no_args_is_help=True,
    # --install-completion / --show-completion: typer writes the script itself, no network.
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain help, as git or ripgrep print it: flags without a `<bool>` type (typer's rich
    # panels show one), no boxes to break when piped, and `[default: ...]` read literally.
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from gbr import __version__

        out.print(f"gleambrctl {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Index a Gleam package locally and search it by meaning and by name."""


app.command()(index.index)
app.command()(search.search)
app.command()(ask.ask)
app.command()(chat.chat)
app.command()(status.status)
app.command("settings")(settings.settings_command)
app.command()(serve.serve)
app.command("open")(open_page)
app.command()(mcp.mcp)
app.command()(graph.refs)
app.command()(graph.callers)
app.command()(graph.callees)
app.command()(graph.graph)
app.command()(models.models)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
