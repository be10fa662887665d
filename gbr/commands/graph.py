"""`gleambrctl refs | callers | callees | graph`: the code graph on the command line.

Declared in the app by `gbr.cli`; the commands parse, ask
`CodeIndex.graph` (the daemon when one runs, else the index file) and render: positions as
`path:line:col` grouped by file, or `--json`, the object the daemon and MCP tools return.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from itertools import groupby
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gbr.commands.common import err, errors, note_stale, out
from gbr.commands.options import DbOption, DebugOption, JsonOption
from gbr.core.graph.model import MAX_DEPTH

DepthOption = Annotated[
    int,
    typer.Option("--depth", min=1, max=MAX_DEPTH, help="How many calls away to follow."),
]
NameArgument = Annotated[
    str, typer.Argument(help="A name, bare (`set_cookie`) or qualified (`wisp.set_cookie`).")
]


def refs(
    name: NameArgument,
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Where a function, type or constant is defined and every place that uses it."""
    data = _ask("refs", name, 1, db, debug)
    if json_out:
        return _print_json(data)
    _print_target(data)
    _print_sites(data["references"], lambda r: f"{r['kind']} in {_in(r)}")
    n = len(data["references"])
    files = len({r["path"] for r in data["references"]})
    out.print(f"[dim]{n} reference{'s' * (n != 1)} in {files} file{'s' * (files != 1)}[/dim]")


def _calls_command(op: str, doc: str) -> Callable[..., None]:
    def command(
        name: NameArgument,
        depth: DepthOption = 1,
        db: DbOption = None,
        json_out: JsonOption = False,
        debug: DebugOption = False,
    ) -> None:
        _calls(op, name, depth, db, json_out, debug)

    command.__name__ = command.__qualname__ = op  # typer names the command after it
    command.__doc__ = doc
    return command


callers = _calls_command(
    "callers", "Who calls a function (pipes, captures and values passed count), to --depth."
)
callees = _calls_command(
    "callees", "What a function calls, to --depth; calls outside the index are external."
)


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
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Draw the import graph, or a call neighbourhood, as DOT or Mermaid text."""
    from gbr.core.errors import ConfigError
    from gbr.core.graph.render import FORMATS, render, write_png

    with errors(debug):
        if fmt not in FORMATS:  # bad usage, before any index is looked for
            raise ConfigError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    data = _ask("graph", target, depth, db, debug)
    with errors(debug):
        if png is not None:
            write_png(data, png)
            err.print(f"[dim]wrote {escape(str(png))}[/dim]")
        if json_out:
            return _print_json(data)
        sys.stdout.write(render(data, fmt))


def _ask(op: str, name: str | None, depth: int, db: Path | None, debug: bool) -> Any:
    """The answer through the index's CodeIndex: the daemon serving it, else this process."""
    import os

    from gbr.access.opening import find_package
    from gbr.commands.output import stamped

    with errors(debug) as command:
        package = find_package(db, os.environ, Path.cwd())
        command.db = package.db
        with package.index(on_stale=note_stale, queries_only=True) as (index, _):
            data = index.graph(op, name, depth)
            root = index.indexed_root()
        return stamped(data, root)


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _in(row: dict[str, Any]) -> str:
    return f"{row['module']}.{row['source']}" if row["source"] else f"module {row['module']}"


def _print_target(data: dict[str, Any]) -> None:
    target = data["target"]
    where = "external: not in the index" if not target["internal"] else "defined at"
    out.print(f"[bold green]{field(target['module'])}.{field(target['name'])}[/bold green]")
    if not target["internal"]:
        out.print(f"  [dim]{where}[/dim]")
    for d in data["definitions"]:
        out.print(
            f"  [dim]{where}[/dim] [cyan]{field(d['path'])}:{d['line']}:{d['col']}[/cyan] "
            f"[magenta]{d['kind']}[/magenta]"
        )


def _print_sites(sites: list[dict[str, Any]], label: Any, indent: str = "") -> None:
    """`path:line:col  label`, one block per file, files in order."""
    for _, group in groupby(sites, key=lambda s: s["path"]):
        for site in group:
            out.print(
                f"{indent}[cyan]{field(site['path'])}:{site['line']}:{site['col']}[/cyan]  "
                f"{field(str(label(site)))}"
            )
        out.print("")


def _calls(op: str, name: str, depth: int, db: Path | None, json_out: bool, debug: bool) -> None:
    data = _ask(op, name, depth, db, debug)
    if json_out:
        return _print_json(data)
    _print_target(data)
    found = data[op]
    if not found:
        out.print(f"no {op} found")
        return
    out.print("")
    for entry in found:
        indent = "  " * (entry["depth"] - 1)
        external = "" if entry["internal"] else "  [dim](external)[/dim]"
        arrow = "←" if op == "callers" else "→"
        via = f"  [dim]{arrow} {field(entry['via'])}[/dim]" if entry["depth"] > 1 else ""
        out.print(
            f"{indent}[bold]{field(entry['module'])}.{field(entry['name'])}[/bold]{external}{via}"
        )
        _print_sites(entry["sites"], lambda s: s["kind"], indent + "  ")


def field(text: str) -> str:
    """A name or path as one safe, markup-free piece of a line (gbr.commands.output)."""
    from gbr.commands.output import one_line

    return escape(one_line(text))
