"""`gleambrctl refs | callers | callees | graph`: the code graph on the command line.

Registered into the app by `gbr.cli` (`register(app)`); the commands parse, ask
`CodeIndex.graph` (the daemon when one runs, else the index file) and render: positions as
`path:line:col` grouped by file, or `--json`, the object the daemon and MCP tools return.
"""

# No `from __future__ import annotations`: typer reads the commands' annotations, which
# name gbr.cli's options, imported inside `register` (gbr.cli imports this module).
import json
import sys
from itertools import groupby
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gbr.core.graph.store import MAX_DEPTH

DepthOption = Annotated[
    int,
    typer.Option("--depth", min=1, max=MAX_DEPTH, help="How many calls away to follow."),
]
NameArgument = Annotated[
    str, typer.Argument(help="A name, bare (`set_cookie`) or qualified (`wisp.set_cookie`).")
]


def register(app: typer.Typer) -> None:
    """Add the graph commands to `app`; called once by gbr.cli, after its own commands."""
    from gbr import cli

    @app.command()
    def refs(
        name: NameArgument,
        db: cli.DbOption = None,
        json_out: cli.JsonOption = False,
        debug: cli.DebugOption = False,
    ) -> None:
        """Where a function, type or constant is defined and every place that uses it."""
        data = _ask(cli, "refs", name, 1, db, debug)
        if json_out:
            return _print_json(data)
        _print_target(cli, data)
        _print_sites(cli, data["references"], lambda r: f"{r['kind']} in {_in(r)}")
        n = len(data["references"])
        files = len({r["path"] for r in data["references"]})
        cli.out.print(
            f"[dim]{n} reference{'s' * (n != 1)} in {files} file{'s' * (files != 1)}[/dim]"
        )

    for op, doc in (
        ("callers", "Who calls a function (pipes, captures and values passed count), to --depth."),
        ("callees", "What a function calls, to --depth; calls outside the index are external."),
    ):
        app.command(op, help=doc)(_calls_command(cli, op))

    @app.command()
    def graph(
        target: Annotated[
            str | None,
            typer.Argument(
                help="A module (its imports and importers) or a name (its call "
                "neighbourhood); none: the whole import graph."
            ),
        ] = None,
        depth: DepthOption = 1,
        fmt: Annotated[str, typer.Option("--format", help="dot (Graphviz) or mermaid.")] = "dot",
        png: Annotated[
            Path | None,
            typer.Option("--png", help="Also draw it to this PNG file (needs Graphviz `dot`)."),
        ] = None,
        db: cli.DbOption = None,
        json_out: cli.JsonOption = False,
        debug: cli.DebugOption = False,
    ) -> None:
        """Draw the import graph, or a call neighbourhood, as DOT or Mermaid text."""
        from gbr.core.errors import ConfigError
        from gbr.core.graph.render import FORMATS, render, write_png

        with cli._errors(debug):
            if fmt not in FORMATS:  # bad usage, before any index is looked for
                raise ConfigError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
        data = _ask(cli, "graph", target, depth, db, debug)
        with cli._errors(debug):
            if png is not None:
                write_png(data, png)
                cli.err.print(f"[dim]wrote {escape(str(png))}[/dim]")
            if json_out:
                return _print_json(data)
            sys.stdout.write(render(data, fmt))


def _calls_command(cli: Any, op: str) -> Any:
    def command(
        name: NameArgument,
        depth: DepthOption = 1,
        db: cli.DbOption = None,
        json_out: cli.JsonOption = False,
        debug: cli.DebugOption = False,
    ) -> None:
        _calls(cli, op, name, depth, db, json_out, debug)

    return command


def _ask(cli: Any, op: str, name: str | None, depth: int, db: Path | None, debug: bool) -> Any:
    """The answer through the index's CodeIndex: the daemon serving it, else this process."""
    from gbr.access import LocalSettings, chosen
    from gbr.cli_output import stamped

    with cli._errors(debug) as command:
        db_path = command.db = cli._find_db(db)
        local = cli._local(LocalSettings(db_path.parent.parent, db_path), None)
        with chosen(local, cli._note_stale) as index:
            data = index.graph(op, name, depth)
            root = index.indexed_root()
        return stamped(data, root)


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _in(row: dict[str, Any]) -> str:
    return f"{row['module']}.{row['source']}" if row["source"] else f"module {row['module']}"


def _print_target(cli: Any, data: dict[str, Any]) -> None:
    target = data["target"]
    where = "external: not in the index" if not target["internal"] else "defined at"
    cli.out.print(f"[bold green]{escape(target['module'])}.{escape(target['name'])}[/bold green]")
    if not target["internal"]:
        cli.out.print(f"  [dim]{where}[/dim]")
    for d in data["definitions"]:
        cli.out.print(
            f"  [dim]{where}[/dim] [cyan]{escape(d['path'])}:{d['line']}:{d['col']}[/cyan] "
            f"[magenta]{d['kind']}[/magenta]"
        )


def _print_sites(cli: Any, sites: list[dict[str, Any]], label: Any, indent: str = "") -> None:
    """`path:line:col  label`, one block per file, files in order."""
    for _, group in groupby(sites, key=lambda s: s["path"]):
        for site in group:
            cli.out.print(
                f"{indent}[cyan]{escape(site['path'])}:{site['line']}:{site['col']}[/cyan]  "
                f"{escape(label(site))}"
            )
        cli.out.print("")


def _calls(
    cli: Any, op: str, name: str, depth: int, db: Path | None, json_out: bool, debug: bool
) -> None:
    data = _ask(cli, op, name, depth, db, debug)
    if json_out:
        return _print_json(data)
    _print_target(cli, data)
    found = data[op]
    if not found:
        cli.out.print(f"no {op} found")
        return
    cli.out.print("")
    for entry in found:
        indent = "  " * (entry["depth"] - 1)
        external = "" if entry["internal"] else "  [dim](external)[/dim]"
        arrow = "←" if op == "callers" else "→"
        via = f"  [dim]{arrow} {escape(entry['via'])}[/dim]" if entry["depth"] > 1 else ""
        cli.out.print(
            f"{indent}[bold]{escape(entry['module'])}.{escape(entry['name'])}[/bold]{external}{via}"
        )
        _print_sites(cli, entry["sites"], lambda s: s["kind"], indent + "  ")
