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
    configure,
    err,
    errors,
    local_index,
    note_stale,
    out,
    package_root,
    print_summary,
    progress_bar,
    start_telemetry,
)
from gbr.commands.options import (
    DbOption,
    DebugOption,
    DeviceOption,
    EmbedCacheOption,
    IncludeDepsOption,
    JsonOption,
    MaxFileSizeOption,
    ModelDirOption,
)

if TYPE_CHECKING:
    from gbr.core.errors import GbrError
    from gbr.core.settings import Settings


def index(
    path: Annotated[Path, typer.Argument(help="Package, or folder of packages.")] = Path("."),
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
            "--rebuild", help="Recreate the index from the source tree; the old file is kept aside."
        ),
    ] = False,
    follow_outside_links: Annotated[
        bool,
        typer.Option(
            "--follow-outside-links", help="Follow symlinks that lead out of PATH (off: skipped)."
        ),
    ] = False,
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
        from gbr.access import RemoteIndex, chosen
        from gbr.core.paths import default_db
        from gbr.core.store.facade import prepare_folder

        root = package_root(path)
        db_path = db or default_db(root)
        config = configure(
            root,
            db_path,
            include_deps=include_deps,
            max_file_size=max_file_size,
            embed_cache=embed_cache,
            device=device,
        )
        settings = config.local_settings(follow_outside_links=follow_outside_links)
        _confirm_wide(root, yes)  # after the options are known good: bad usage comes first
        command.db = db_path
        prepare_folder(db_path)
        start_telemetry(db_path, echo=verbose)
        _remember_deps(db_path, include_deps, config.settings)
        local = local_index(settings, model_dir, config.device)
        with chosen(local, note_stale) as chosen_index:
            if isinstance(chosen_index, RemoteIndex):
                if rebuild:
                    raise _daemon_in_the_way(chosen_index.pid, db_path)
                if not json_out:
                    err.print(f"[dim]indexing through the daemon (pid {chosen_index.pid})[/dim]")
                summary = chosen_index.index()
            else:
                _set_aside_if_needed(db_path, rebuild)
                local.model  # noqa: B018 - loaded before the bar starts
                show_bar = not json_out and err.is_terminal
                with progress_bar(show_bar) as on_progress:
                    summary = local.index(progress=on_progress)
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


def _set_aside_if_needed(db: Path, rebuild: bool) -> None:
    """Before a run: with --rebuild, or when the file is damaged, move it aside (one line)."""
    from gbr.core.store.facade import check_index, set_aside

    if not db.exists():
        return
    bad = check_index(db)
    if bad is None and not rebuild:
        return
    aside = set_aside(db, "corrupt" if bad is not None else "old")
    if bad is not None:
        err.print(
            f"[yellow]the index {escape(str(db))} could not be read ({escape(bad.detail)}); "
            f"kept it as {escape(aside.name)} and rebuilding it from the source tree[/yellow]"
        )
    else:
        err.print(f"[dim]kept the old index as {escape(aside.name)}; rebuilding it[/dim]")


def _confirm_wide(root: Path, yes: bool) -> None:
    """Ask before indexing `/`, home, or a folder with no Gleam package in sight; refuse
    with a hint when nobody can answer."""
    from gbr.core.errors import ConfigError
    from gbr.core.paths import wide_folder

    why = None if yes else wide_folder(root, os.environ)
    if why is None:
        return
    if sys.stdin.isatty() and err.is_terminal:
        if typer.confirm(f"{why}; index everything under it?", default=False, err=True):
            return
        raise typer.Exit(1)
    raise ConfigError(f"{why}; pass the path of a Gleam package, or --yes to index it anyway")


def _remember_deps(db_path: Path, include_deps: bool | None, settings: Settings) -> None:
    """`--include-deps` or `--no-include-deps` sticks, so a later plain `index` keeps it."""
    from dataclasses import replace

    from gbr.core.settings import save_settings, settings_path

    if include_deps is None or settings.include_deps == include_deps:
        return
    save_settings(db_path.parent, replace(settings, include_deps=include_deps))
    err.print(
        f"[dim]note: include_deps = {str(include_deps).lower()} is remembered in "
        f"{escape(str(settings_path(db_path.parent)))}; `gleambrctl settings unset "
        "include_deps` forgets it[/dim]"
    )
