"""`gleambrctl models`: list the models gbr knows, and fetch one into the cache."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gbr.commands.common import err, errors, out
from gbr.commands.options import DebugOption, JsonOption

if TYPE_CHECKING:
    from gbr.core.embed.catalogue import KnownModel
    from gbr.core.embed.model_fetch import Progress

ACTIONS = ("list", "fetch")


def models(
    action: Annotated[str, typer.Argument(help="list, or fetch NAME.")] = "list",
    name: Annotated[str | None, typer.Argument(help="The model to fetch.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Accept the model's licence without asking.")
    ] = False,
    catalogue: Annotated[
        Path | None,
        typer.Option("--catalogue", help="A models.json of your own [default: the one gbr ships]."),
    ] = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Models gbr knows: `list` shows them (purpose, size, licence, source, cached);
    `fetch NAME` downloads one into $GBR_HOME/models after showing its licence, checks
    its sha256, and prints how to use it (--model-dir, or ask --reranker). GBR_MODELS_URL
    fetches from a mirror instead of the Hugging Face hub."""
    with errors(debug):
        from gbr.core.embed.catalogue import CATALOGUE, load_catalogue, models_root
        from gbr.core.errors import ConfigError

        if action not in ACTIONS:
            raise ConfigError(f"unknown action {action!r}; use list, or fetch NAME")
        known = load_catalogue(catalogue or CATALOGUE)
        root = models_root(os.environ)
        if action == "list":
            _list(list(known.values()), root, json_out)
        elif name is None:
            raise ConfigError("fetch needs a NAME; `gleambrctl models list` names them")
        else:
            _fetch(known, name, root, yes, json_out)


def _list(known: list[KnownModel], root: Path, json_out: bool) -> None:
    from gbr.core.embed.catalogue import fetched_folder

    rows = [
        {
            "name": m.name,
            "purpose": m.purpose,
            "summary": m.summary,
            "size_mb": round(m.approx_bytes / 1e6, 1),
            "licence": m.licence,
            "source": m.source_url,
            "cached": str(found) if (found := fetched_folder(root, m)) else None,
        }
        for m in known
    ]
    if json_out:
        out.print_json(json.dumps({"schema_version": 1, "models": rows}))
        return
    for row in rows:
        cached = row["cached"] or "not fetched"
        out.print(
            f"{row['name']:<22} {row['purpose']:<14} {row['size_mb']:>6} MB  "
            f"{row['licence']:<12} {escape(str(cached))}"
        )
        out.print(f"  {escape(str(row['summary']))}; {row['source']}")


def _fetch(known: dict[str, KnownModel], name: str, root: Path, yes: bool, json_out: bool) -> None:
    from gbr.core.embed.catalogue import base_url, fetched_folder, known_model
    from gbr.core.embed.model_fetch import fetch_model
    from gbr.core.errors import ConfigError

    model = known_model(known, name)
    folder = fetched_folder(root, model)
    if folder is None:
        base = base_url(os.environ)
        err.print(
            f"{model.name}: {escape(model.summary)}\n"
            f"licence: {model.licence} ({model.licence_url})\n"
            f"source: {model.source_url}\n"
            f"about {model.approx_bytes / 1e6:.0f} MB from {escape(base)}"
        )
        if not yes:
            if not sys.stdin.isatty():
                raise ConfigError(
                    f"fetching {model.name} means accepting its licence ({model.licence}); "
                    "add --yes to accept it"
                )
            if not typer.confirm(f"Accept the {model.licence} licence and download?"):
                raise ConfigError("not fetched: the licence was not accepted")
        with _bar() as progress:
            folder = fetch_model(model, base, root, progress)
    if json_out:
        out.print_json(json.dumps({"schema_version": 1, "name": model.name, "path": str(folder)}))
        return
    out.print(f"{model.name} is in {escape(str(folder))}")
    for line in usage(model, folder):
        out.print(f"  {escape(line)}")


def usage(model: KnownModel, folder: Path) -> list[str]:
    """How to use a fetched model, by what it is for."""
    if model.purpose == "embedder":
        return [
            f"gleambrctl index --model-dir {folder}   (then search with the same --model-dir)",
            f"or: export GBR_MODEL_DIR={folder}",
        ]
    return [
        f"gleambrctl ask --rerank --reranker {folder} QUESTION",
        f"or: export GBR_RERANK_MODEL_DIR={folder}",
    ]


@contextmanager
def _bar() -> Iterator[Progress]:
    """A byte progress bar per file on stderr; gone when the fetch ends."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, object] = {}

        def update(file: str, received: int, expected: int | None) -> None:
            if file not in tasks:
                tasks[file] = bar.add_task(file, total=expected)
            bar.update(tasks[file], completed=received)  # type: ignore[arg-type]

        yield update
