"""Index progress moves while one big file's vectors fill in: chunks are reported as they
get vectors, a page at a time, behind the write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.records import Progress

PAGE = 32  # texts per embedder page
FUNCTIONS = 100  # one chunk each: about three pages


def big_module(functions: int) -> str:
    return "\n".join(
        f"/// Adds {i} to a total of the ledger entry number {i}.\n"
        f"pub fn add_{i}(total: Int) -> Int {{\n  let step = {i} * 2\n  total + step - {i}\n}}\n"
        for i in range(functions)
    )


def test_chunk_progress_arrives_while_one_big_file_is_embedded(
    make_package: Callable[[dict[str, str | bytes]], Path], model: OnnxEmbedder
) -> None:
    root = make_package({"src/ledger.gleam": big_module(FUNCTIONS)})
    events: list[Progress] = []

    options = IndexOptions(root=root, db=root / "index.duckdb", batch_chunks=PAGE)
    summary = run_index(options, model, events.append)

    assert summary.files_indexed == 1 and summary.chunks_embedded == FUNCTIONS
    during = [p for p in events if p.chunks_embedded < FUNCTIONS]  # vectors still to come
    steps = sorted({p.chunks_embedded for p in events if p.chunks_embedded})
    assert len(steps) >= FUNCTIONS // PAGE, steps  # several moves, not one jump
    assert steps[-1] == FUNCTIONS
    assert [p.chunks_embedded for p in events] == sorted(p.chunks_embedded for p in events)
    assert all(p.chunks_queued == FUNCTIONS for p in events if p.chunks_embedded)
    # With a rate, there is an ETA before the file is done, and it reaches 0 at the end.
    assert any(p.eta() is not None and p.eta() > 0 for p in during if p.chunks_embedded)
    assert all(p.done == 1 for p in events if p.chunks_queued)  # written before its vectors
    assert events[-1].done == 1 and events[-1].eta() == 0


def test_without_a_watcher_the_run_is_the_same(
    make_package: Callable[[dict[str, str | bytes]], Path], model: OnnxEmbedder
) -> None:
    root = make_package({"src/ledger.gleam": big_module(10)})
    summary = run_index(IndexOptions(root=root, db=root / "index.duckdb"), model)
    assert (summary.files_indexed, summary.chunks_embedded) == (1, 10)
