"""What every command shares: the two consoles, the one-line error handler, and the
renderings two commands print. Opening a package and its index is gbr.access.opening's.

Heavy imports (onnxruntime, duckdb, pykka) happen inside the functions, so `--help` is
instant and a cold `search` pays only for what it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from gbr.access.discovery import DaemonInfo
    from gbr.core.errors import GbrError
    from gbr.core.records import Hit, IndexSummary, Progress

# soft_wrap: piped output keeps long lines whole instead of breaking them at 80 columns (an
# error is one line). emoji off: file names and reasons are the user's text, and `:x:` in
# one must print as written; markup in them is escaped where they are printed.

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
INTERRUPTED = "interrupted; finished files are kept in the index"


class _Command:
    """What a command's error handler needs to know: the index file it reads, once known."""

    db: Path | None = None


@contextmanager
def errors(debug: bool) -> Iterator[_Command]:
    """Every GbrError becomes one line on stderr and its exit code; tracebacks only with --debug.

    A DuckDB error that says the index file is damaged (found mid-query, by a block's
    checksum) is one such line too, naming the file and the rebuild that fixes it.
    """
    from gbr.core.errors import GbrError

    command = _Command()
    try:
        yield command
    except GbrError as exc:
        _interrupted_meanwhile()
        fail(exc, debug)
    except Exception as exc:
        _interrupted_meanwhile()
        bad = _damage(exc, command.db)
        if bad is None:
            raise
        fail(bad, debug)
    except KeyboardInterrupt:
        from gbr import interrupts

        if interrupts.installed():
            interrupts.exit_now()  # bounded: actors still busy do not hold the exit
        err.print(f"[yellow]{INTERRUPTED}[/yellow]")
        raise typer.Exit(130) from None


def _interrupted_meanwhile() -> None:
    """An error raised after a signal arrived ends the run as the signal does: one line,
    the signal's exit code (a signal landing in a DuckDB call surfaces as its error)."""
    from gbr import interrupts

    if interrupts.installed() and interrupts.signalled():
        interrupts.exit_now()


def fail(exc: GbrError, debug: bool) -> NoReturn:
    if debug:
        err.print_exception()
    err.print(f"[red]error:[/red] {escape(str(exc))}")
    raise typer.Exit(exc.exit_code) from None


def _damage(exc: Exception, db: Path | None) -> GbrError | None:
    if db is None:
        return None
    from gbr.core.store.facade import damaged

    return damaged(exc, db)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def note_stale(info: DaemonInfo | None, why: str) -> None:
    """Tell the user (on stderr) about a dead daemon's discovery file that was removed."""
    from gbr.access.discovery import describe_stale

    err.print(f"[dim]note: {escape(describe_stale(info, why))}[/dim]")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[Progress], None] | None]:
    from gbr.commands.progress import index_progress

    with index_progress(err, enabled) as update:
        yield update


def embedding_note(embedded: Mapping[str, int] | None, db: Path, via: str | None) -> str | None:
    """`dense: 43 % embedded (…)` while some chunks have no vector yet, else None: dense
    search saw only the embedded ones (BM25 saw all), and this says why and what to do."""
    if not embedded or embedded["chunks"] >= embedded["of"]:
        return None
    from gbr.core.store.snapshot import lock_holder

    share = 100 * embedded["chunks"] // max(1, embedded["of"])
    if via is not None:
        why = "the daemon is still embedding"
    elif lock_holder(db) is not None:
        why = "index still embedding"
    else:
        why = "run `gleambrctl index` to embed the rest"
    return f"dense: {share} % embedded ({why})"


def print_summary(s: IndexSummary) -> None:
    if s.reindex_reason:
        out.print(f"[yellow]re-indexed everything:[/yellow] {escape(s.reindex_reason)}")
    out.print(
        f"[bold]{s.files_seen}[/bold] files seen: {s.files_indexed} indexed, "
        f"{s.files_unchanged} unchanged, {s.files_dropped} dropped, {s.files_removed} removed"
    )
    if s.changed_nothing and s.chunks_in_index is not None:
        out.print(
            f"nothing changed; [bold]{s.chunks_in_index}[/bold] chunks in the index "
            f"(checked in {s.seconds:.2f} s)"
        )
    else:
        cache = f"; embed cache {s.cache_hits} hits" if s.cache_hits else ""
        if s.chunks == 0 and s.vectors_filled:  # a run cut short, resumed: no chunk rate
            out.print(
                f"[bold]{s.vectors_filled}[/bold] missing vectors filled in ({s.chunks_embedded}"
                f" embedded, {s.chunks_cached} cached) in {s.seconds:.2f} s{cache}"
            )
        else:
            filled = f", {s.vectors_filled} of them for chunks already in the index"
            out.print(
                f"[bold]{s.chunks}[/bold] chunks ({s.chunks_embedded} embedded, "
                f"{s.chunks_cached} cached{filled if s.vectors_filled else ''}) "
                f"in {s.seconds:.2f} s"
                + (f", {s.chunks_per_second:.0f} chunks/s" if s.chunks else "")
                + cache
            )
    if s.seconds_searchable is not None:
        out.print(
            f"phases: chunks and BM25 in {s.seconds_searchable:.2f} s, "
            f"vectors in {max(0.0, s.seconds - s.seconds_searchable):.2f} s"
        )
    if s.restarts or s.dead_letters:
        out.print(f"[yellow]{s.restarts} actor restarts, {s.dead_letters} dead letters[/yellow]")
    for problem in s.dropped:
        out.print(f"  [red]dropped[/red] {escape(problem.path)}: {escape(problem.reason)}")
    for problem in s.partial:
        out.print(f"  [yellow]partial[/yellow] {escape(problem.path)}: {escape(problem.reason)}")
    out.print(f"index: {escape(s.db)}")
    if s.files_seen == 0:
        warn(
            f"no .gleam files under {s.root} (hidden folders, build/ and ignored files are "
            "skipped); pass the path of a Gleam package"
        )


def print_hits(hits: list[Hit]) -> None:
    if not hits:
        out.print("no matches")
        return
    from gbr.commands.output import one_line

    def field(text: str) -> str:
        return escape(one_line(text))

    for hit in hits:
        out.print(
            f"[bold]{hit.rank:>2}[/bold] [cyan]{field(hit.path)}:{hit.start_line}-{hit.end_line}"
            f"[/cyan]  {field(hit.module)}  [magenta]{field(hit.kind)}[/magenta] "
            f"[bold green]{field(hit.name)}[/bold green]  [dim]{hit.score:.4f}[/dim]"
        )
        if hit.signature:
            out.print(f"     {field(hit.signature)}")
        if hit.doc:
            out.print(f"     [dim]{field(hit.doc.split('. ')[0][:120])}[/dim]")
        body = [
            ln for ln in hit.text.splitlines() if ln.strip() and not ln.lstrip().startswith("//")
        ]
        for line in body[1:4]:
            out.print(f"     [dim]│[/dim] {field(line[:110])}")
