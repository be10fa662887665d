"""Index progress moves inside one big file: chunks are reported as they get vectors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.records import Chunk, Progress
from gbr.core.store.indexing import PROGRESS_STEP, embed_chunks

FUNCTIONS = 100  # one chunk each: about three progress steps of PROGRESS_STEP


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

    summary = run_index(IndexOptions(root=root, db=root / "index.duckdb"), model, events.append)

    assert summary.files_indexed == 1 and summary.chunks_embedded == FUNCTIONS
    during = [p for p in events if p.done == 0]  # the one file is not written yet
    steps = sorted({p.chunks_embedded for p in during if p.chunks_embedded})
    assert len(steps) >= FUNCTIONS // PROGRESS_STEP, steps  # several moves, not one jump
    assert steps[-1] == FUNCTIONS
    assert [p.chunks_embedded for p in events] == sorted(p.chunks_embedded for p in events)
    assert all(p.chunks_queued == FUNCTIONS for p in events if p.chunks_embedded)
    # With a rate, there is an ETA before the file is done, and it reaches 0 at the end.
    assert any(p.eta() is not None and p.eta() > 0 for p in during if p.chunks_embedded)
    assert events[-1].done == 1 and events[-1].eta() == 0


def test_without_a_watcher_the_run_is_the_same(
    make_package: Callable[[dict[str, str | bytes]], Path], model: OnnxEmbedder
) -> None:
    root = make_package({"src/ledger.gleam": big_module(10)})
    summary = run_index(IndexOptions(root=root, db=root / "index.duckdb"), model)
    assert (summary.files_indexed, summary.chunks_embedded) == (1, 10)


def test_embedding_in_reported_slices_gives_the_same_vectors(model: OnnxEmbedder) -> None:
    chunks = [
        Chunk(
            path="src/a.gleam",
            module="a",
            package="p",
            kind="function",
            name=f"f{i}",
            signature=f"pub fn f{i}() -> Int",
            visibility="pub",
            start_line=i * 3 + 1,
            end_line=i * 3 + 3,
            part=0,
            parts=1,
            doc="",
            text=f"pub fn f{i}() -> Int {{\n  {'1 + ' * (i % 7)}{i}\n}}",
        )
        for i in range(PROGRESS_STEP * 2 + 5)
    ]
    calls: list[tuple[int, int]] = []
    whole, _ = embed_chunks(chunks, model, lambda keys: {})
    sliced, cached = embed_chunks(
        chunks, model, lambda keys: {}, on_progress=lambda n, total: calls.append((n, total))
    )
    total = len(chunks)
    assert calls == [(0, total), (PROGRESS_STEP, total), (PROGRESS_STEP, total), (5, total)]
    assert not any(cached)
    for a, b in zip(whole, sliced, strict=True):
        assert a.chunk == b.chunk
        assert np.allclose(a.vector, b.vector, atol=1e-5)
