"""The `index` progress bar: files, and chunks as they get vectors, with a rate and an ETA.

Files alone are not enough: every file is written first, and their vectors come behind, for
much longer (wisp's `src/wisp.gleam` alone takes half a minute), so the bar follows chunks
embedded whenever there are any to embed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from gbr.core.records import Progress


def _clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def progress_text(p: Progress) -> str:
    """One line after the bar: files, chunks embedded, rate, ETA (`-:--` until known)."""
    files = f"{p.done}/{p.expected}" if p.expected is not None else f"{p.done}/?"
    parts = [f"{files} files"]
    if p.chunks_queued:
        parts.append(f"{p.chunks_embedded}/{p.chunks_queued} chunks embedded")
        parts.append(f"{p.rate:.0f} chunks/s")
    else:
        parts.append(f"{p.chunks} chunks")
    if p.dropped:
        parts.append(f"{p.dropped} dropped")
    eta = p.eta()
    parts.append(f"ETA {_clock(eta) if eta is not None else '-:--'}")
    return ", ".join(parts)


def bar_position(p: Progress) -> tuple[float, float | None]:
    """(completed, total) for the bar: chunks when some need vectors, else files."""
    left = p.chunks_left()
    if p.chunks_queued and left is not None:
        return float(p.chunks_embedded), p.chunks_embedded + left
    return float(p.done), (float(p.expected) if p.expected is not None else None)


@contextmanager
def index_progress(
    console: Console, enabled: bool, transient: bool = True
) -> Iterator[Callable[[Progress], None] | None]:
    """A progress callback drawing on `console`, or None when disabled (--json, not a tty)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    bar = RichProgress(
        TextColumn("indexing"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
    )
    task = bar.add_task("starting", total=None)

    def update(p: Progress) -> None:
        completed, total = bar_position(p)
        bar.update(task, completed=completed, total=total, description=progress_text(p))

    with bar:
        yield update
