"""`gleambrctl search`: one query or one per line, rendered as text, vimgrep lines or JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gbr.access.requests import MAX_SEARCH_K
from gbr.commands.common import embedding_note, err, errors, note_stale, print_hits
from gbr.commands.options import (
    MODE_HELP,
    DbOption,
    DebugOption,
    JsonOption,
    ModelDirOption,
    TestsOption,
)


def search(
    query: Annotated[str, typer.Argument(help="Words or an identifier; `-` reads one per line.")],
    k: Annotated[
        int | None,
        typer.Option(
            "-k",
            "--top",
            min=1,
            max=MAX_SEARCH_K,
            help="Hits to show [default: the package's setting, else 10].",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help=MODE_HELP + " [default: the package's setting, else hybrid]"),
    ] = None,
    in_path: Annotated[
        str | None, typer.Option("--path", help="Only files under this prefix or glob.")
    ] = None,
    module: Annotated[
        str | None, typer.Option("--module", help="Only this module and its submodules.")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only these kinds (function, type, type_alias, ...)."),
    ] = None,
    tests: TestsOption = None,
    db: DbOption = None,
    json_out: JsonOption = False,
    vimgrep: Annotated[
        bool,
        typer.Option(
            "--vimgrep",
            help="One `path:line:col: name (kind) signature` line per hit, paths from the "
            "current folder: for quickfix lists and editors' grep modes.",
        ),
    ] = False,
    model_dir: ModelDirOption = None,
    debug: DebugOption = False,
) -> None:
    """Search the index: dense vectors and BM25, fused (see --mode for what the score means)."""
    with errors(debug) as command:
        import os

        from gbr.access.opening import find_package
        from gbr.access.requests import SearchRequest
        from gbr.commands.output import stamped
        from gbr.core.errors import ConfigError
        from gbr.core.rank.priors import parse_test_policy
        from gbr.core.rank.search import KINDS, Filter
        from gbr.core.records import MODES

        if mode is not None and mode not in MODES:
            raise ConfigError(f"unknown --mode {mode!r}; use one of {', '.join(MODES)}")
        bad = [k for k in kind or [] if k not in KINDS]
        if bad:
            raise ConfigError(f"unknown --kind {bad[0]!r}; use one of {', '.join(KINDS)}")
        if json_out and vimgrep:
            raise ConfigError("--json and --vimgrep are two output formats; pass one")
        if tests is not None:
            parse_test_policy(tests)  # a bad value is bad usage, before any index is looked for
        SearchRequest(query).check()  # before any index is looked for: exit 2
        package = find_package(db, os.environ, Path.cwd())
        db_path = command.db = package.db
        settings = package.config.settings
        k = k or settings.k or 10
        mode = mode or settings.mode or "hybrid"
        policy = parse_test_policy(tests or settings.tests or "demote")
        where = Filter(path=in_path, module=module, kinds=tuple(kind or ()), tests=policy)
        # Kept open for all the queries of `search -`, as one search would; those serve
        # many queries, and hold the BM25 postings too (gbr.access.engine.open_searcher).
        many = query == "-"
        with package.index(
            model_dir, on_stale=note_stale, keep_open=True, serving=many, queries_only=True
        ) as (index, _):
            root = index.indexed_root()
            if many:
                for line in _stdin_lines():
                    if line.strip():
                        found = index.search(SearchRequest(line.strip(), k, mode, where))  # type: ignore[arg-type]
                        sys.stdout.write(json.dumps(stamped(found.as_dict(), root)) + "\n")
                        sys.stdout.flush()
                return
            found = index.search(SearchRequest(query, k, mode, where))  # type: ignore[arg-type]
            via = index.via
        _render_search(stamped(found.as_dict(), root), root, json_out, vimgrep)
        if mode != "bm25" and (
            note := embedding_note(found.as_dict().get("embedded"), db_path, via)
        ):
            err.print(f"[dim]{escape(note)}[/dim]")


def _render_search(
    data: dict[str, Any], root: str | Path | None, json_out: bool, vimgrep: bool
) -> None:
    """The `search --json` object as JSON, vimgrep lines, or the reading layout."""
    from gbr.commands.output import vimgrep_lines
    from gbr.core.records import Hit

    hits = [Hit.from_dict(hit) for hit in data["results"]]
    if json_out:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif vimgrep:
        sys.stdout.writelines(line + "\n" for line in vimgrep_lines(hits, root or "."))
    else:
        print_hits(hits)
    if data.get("hint") and not json_out:
        err.print(f"[yellow]note:[/yellow] {escape(data['hint'])}")


def _stdin_lines() -> Iterator[str]:
    """The queries of `search -`, one a line; a line that is not UTF-8 ends the run with one
    line on stderr (exit 2), after the answers to the lines before it."""
    from gbr.core.errors import ConfigError

    for number, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"line {number} of stdin is not valid UTF-8; pass queries as UTF-8 text"
            ) from None
