"""How a chat shows answers, hits, context and status on a rich Console.

Hit lists and index summaries are rendered by the same functions as `gleambrctl search` and
`index` (handed in as `Views` by the CLI), so the chat never drifts from the commands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from gbr.core.answer.context import render_with_outlines
from gbr.core.answer.oracle import Answer
from gbr.core.answer.prompt import chunk_header, sources_line
from gbr.core.records import Hit, IndexSummary, ProgressCallback


@dataclass(frozen=True)
class Views:
    """The CLI's own renderers, reused: hits as `search` prints them, `index`'s bar and summary."""

    print_hits: Callable[[list[Hit]], None]
    print_summary: Callable[[IndexSummary], None]
    progress_bar: Callable[[], AbstractContextManager[ProgressCallback | None]]


def hint(console: Console, text: str) -> None:
    console.print(f"[yellow]{escape(text)}[/yellow]")


def error(console: Console, text: str) -> None:
    console.print(f"[red]error:[/red] {escape(text)}")


def hit_line(hit: Hit) -> str:
    """The context header without its `###`: what `/open N` and `/context` refer to."""
    return chunk_header(hit.rank, hit).removeprefix("### ")


def hit_list(console: Console, hits: Sequence[Hit]) -> None:
    for hit in hits:
        console.print(f"  {escape(hit_line(hit))}")


def answer_footer(console: Console, answer: Answer) -> None:
    """After the streamed text: why it stopped, or the sources and unknown citations."""
    hits = sorted((c.hit for c in answer.chunks), key=lambda h: h.rank)
    if answer.cancelled:
        console.print("[yellow](cancelled)[/yellow]")
        return
    if answer.error is not None:
        error(console, answer.error)
        if hits:
            console.print("[dim]retrieved:[/dim]")
            hit_list(console, hits)
        return
    if not answer.text.strip():
        hint(console, "the model sent an empty answer; ask again, or /context to see what it got")
    console.print(f"[dim]sources: {escape(sources_line(answer.sources()))}[/dim]")
    unknown = [c for c in answer.citations if not c.known]
    if unknown:
        listed = ", ".join(f"{c.path}:{c.line}" for c in unknown)
        console.print(f"[yellow]not in the context sent:[/yellow] {escape(listed)}")


def context(console: Console, answer: Answer) -> None:
    """The context exactly as it was sent (order and headers), after a line on the history."""
    turns = answer.history_sent // 2
    trimmed = f", {answer.history_trimmed // 2} older left out" if answer.history_trimmed else ""
    console.print(
        f"[dim]question: {escape(answer.question)}; {len(answer.chunks)} chunks, "
        f"{len(answer.outlines)} outlines; "
        f"{turns} earlier turn{'s' if turns != 1 else ''} sent{trimmed}[/dim]"
    )
    sent = render_with_outlines(answer.chunks, answer.outlines)
    console.out(sent.rstrip("\n"), highlight=False)


def open_hit(console: Console, hit: Hit) -> None:
    console.print(f"[bold]{escape(hit_line(hit))}[/bold]")
    width = len(str(hit.start_line + hit.text.count("\n")))
    for number, line in enumerate(hit.text.splitlines(), start=hit.start_line):
        console.out(f"{number:>{width}} │ {line}", highlight=False)


def status(console: Console, report: dict[str, Any], settings: list[tuple[str, str]]) -> None:
    console.print(f"package  {escape(report['root'])}")
    if not report["indexed"]:
        console.print(f"index    {escape(report['db'])}: none yet; type /index")
    else:
        console.print(
            f"index    {escape(report['db'])} ({report['db_bytes'] / 1e6:.1f} MB): "
            f"{report['files_ok']} files, {report['files_failed']} dropped; "
            f"{report['chunks']} chunks ({report['stale_chunks']} stale)"
        )
        for item in report["dropped"]:
            console.print(f"  [red]dropped[/red] {escape(item['path'])}: {escape(item['error'])}")
        for item in report.get("partial", []):
            console.print(
                f"  [yellow]partial[/yellow] {escape(item['path'])}: {escape(item['error'])}"
            )
    if "pid" in report:  # a daemon's report
        busy = f", indexing ({report['indexing']})" if report.get("indexing") else ""
        console.print(
            f"daemon   pid {report['pid']}, up {report['uptime_seconds']:.0f} s, "
            f"watcher {report['watcher']}, {report['queue_depth']} queued{busy}"
        )
    for name, value in settings:
        console.print(f"{name:<8} {escape(value)}")
