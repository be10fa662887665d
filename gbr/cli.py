"""`gleambrctl`: the typer app. It declares the commands; their bodies live in gbr/commands/,
one module per concept.

Heavy imports (onnxruntime, duckdb, pykka) happen inside the commands, so `--help` is instant
and a cold `search` pays only for what it uses.
"""

from __future__ import annotations

from typing import Annotated

import typer

from gbr.commands import ask, chat, coercion, graph, index, mcp, search, serve, settings, status
from gbr.commands.common import out

# Plain option values without pydantic: 65-70 ms of a cold search (gbr/commands/coercion.py).
coercion.install()

app = typer.Typer(
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
app.command()(mcp.mcp)
app.command()(graph.refs)
app.command()(graph.callers)
app.command()(graph.callees)
app.command()(graph.graph)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
