"""`gleambrctl index`: walk, chunk, embed and store a package, here or through its daemon."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gbr.commands.common import (
    INTERRUPTED,
    err,
    errors,
    note_stale,
    out,
    print_summary,
    progress_bar,
    warn,
)
from gbr.commands.options import (
    DbOption,
    DebugOption,
    DeviceOption,
    EmbedCacheOption,
    FollowOutsideLinksOption,
    IncludeDepsOption,
    JsonOption,
    MaxFileSizeOption,
    ModelDirOption,
    PackageArgument,
)

if TYPE_CHECKING:
    from gbr.access.opening import SetAside
    from gbr.core.errors import GbrError


def index(
    path: PackageArgument = Path("."),
    db: DbOption = None,
    json_out: JsonOption = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 when any file was dropped or only partly parsed."),
    ] = False,
    include_deps: IncludeDepsOption = None,
    max_file_size: MaxFileSizeOption = None,
    model_dir: ModelDirOption = None,
    embed_cache: EmbedCacheOption = None,
    device: DeviceOption = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Echo telemetry events to stderr.")
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="Recreate the index from the source tree (searches use the old one until "
            "the new one is complete).",
        ),
    ] = False,
    follow_outside_links: FollowOutsideLinksOption = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Index PATH even if no gleam.toml is near.")
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Index the .gleam files under PATH (incremental: unchanged files cost one hash).

    A damaged index file is found before the run, kept aside and rebuilt from the source.
    Ctrl-C or SIGTERM stops within about a second and exits 130 (SIGINT) or 143 (SIGTERM);
    finished files are kept, and the next run picks up the rest.
    """
    from gbr import interrupts

    interrupts.install(INTERRUPTED)
    with errors(debug) as command:
        from gbr.access import RemoteIndex
        from gbr.access.opening import open_package

        package = open_package(
            path,
            db,
            os.environ,
            include_deps=include_deps,
            max_file_size=max_file_size,
            embed_cache=embed_cache,
            device=device,
        )
        _confirm_wide(package.too_wide() if not yes else None)  # bad usage comes first
        command.db = package.db
        package.prepare(warn, echo=verbose)
        if (saved := package.remember_include_deps(include_deps)) is not None:
            err.print(
                f"[dim]note: include_deps = {str(include_deps).lower()} is remembered in "
                f"{escape(str(saved))}; `gleambrctl settings unset include_deps` forgets it[/dim]"
            )
        with package.index(
            model_dir, follow_outside_links=follow_outside_links, on_stale=note_stale
        ) as (chosen_index, local):
            if isinstance(chosen_index, RemoteIndex):
                if rebuild:
                    raise _daemon_in_the_way(chosen_index.pid, package.db)
                if not json_out:
                    err.print(f"[dim]indexing through the daemon (pid {chosen_index.pid})[/dim]")
                summary = chosen_index.index()
            else:
                aside = package.set_aside_if_damaged()
                _say_set_aside(aside, package.db)
                rebuild = rebuild and aside is None and package.db.is_file()
                if rebuild:
                    err.print(
                        "[dim]rebuilding the index from the source tree; searches use the old "
                        "one until the new one is complete[/dim]"
                    )
                local.model  # noqa: B018 - loaded before the bar starts
                show_bar = not json_out and err.is_terminal
                with progress_bar(show_bar) as on_progress:
                    summary = local.index(progress=on_progress, rebuild=rebuild)
        if json_out:
            from gbr.commands.output import stamped

            out.print_json(json.dumps(stamped(summary.as_dict(), summary.root)))
        else:
            print_summary(summary)
        if strict and (summary.files_dropped or summary.files_partial):
            from gbr.core.errors import GbrError

            raise GbrError(
                f"--strict: {summary.files_dropped} files dropped, {summary.files_partial} "
                "only partly parsed; fix the files listed above, or index without --strict"
            )


def _daemon_in_the_way(pid: int, db: Path) -> GbrError:
    from gbr.core.errors import DaemonError

    return DaemonError(
        f"the daemon (pid {pid}) serves {db}; stop it (Ctrl-C, or kill {pid}) before --rebuild"
    )


def _say_set_aside(aside: SetAside | None, db: Path) -> None:
    """One line about a damaged index file moved aside before the run, if one was."""
    if aside is None:
        return
    err.print(
        f"[yellow]the index {escape(str(db))} could not be read ({escape(aside.detail)}); "
        f"kept it as {escape(aside.kept_as)} and rebuilding it from the source tree[/yellow]"
    )


def _confirm_wide(why: str | None) -> None:
    """Ask before indexing `/`, home, or a folder with no Gleam package in sight (`why`
    says which); refuse with a hint when nobody can answer."""
    from gbr.core.errors import ConfigError

    if why is None:
        return
    if sys.stdin.isatty() and err.is_terminal:
        if typer.confirm(f"{why}; index everything under it?", default=False, err=True):
            return
        raise typer.Exit(1)
    raise ConfigError(f"{why}; pass the path of a Gleam package, or --yes to index it anyway")
