"""Searchable before embedding ends: chunks and BM25 first, vectors behind (issue 14).

Real grammar, real model, real DuckDB files. A run is cut short in the embed phase with a
crash drill on the embedder (its 3rd and 4th messages: two pages of vectors get through,
then the retry fails too and the run stops), which leaves an index part embedded.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from gbr.access.engine import found
from gbr.access.requests import SearchRequest
from gbr.actors.faults import FaultPlan, parse_faults
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import SupervisionError
from gbr.core.parse.chunk_text import embed_text, search_text
from gbr.core.rank.search import Searcher
from gbr.core.records import Chunk, SourceFile
from gbr.core.store.facade import Store, StoredChunk
from gbr.core.store.indexing import prepare_chunks
from gbr.core.store.snapshot import next_path

PAGE = 16  # texts per embedder page in these runs


def cut_short(root: Path, db: Path, model: OnnxEmbedder) -> tuple[int, int]:
    """Index with the embedder crashing on its 3rd and 4th page: (embedded, chunks) left."""
    faults = FaultPlan(crash_at={"embedder": {3, 4}})
    options = IndexOptions(root=root, db=db, batch_chunks=PAGE, faults=faults, embed_cache=None)
    with pytest.raises(SupervisionError, match="embedder crashed twice on EmbedMissing"):
        run_index(options, model)
    with Store.open(db, read_only=True) as store:
        return store.coverage()


def test_a_run_cut_short_is_searchable_and_the_next_run_embeds_only_the_rest(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "index.duckdb"
    embedded, chunks = cut_short(small_example, db, model)
    assert 0 < embedded < chunks  # two pages got their vectors, the rest did not

    with Store.open(db, read_only=True) as store:
        assert not store.fulltext_stale() and store.has_fulltext()
        (name, path) = store.con.execute(
            "SELECT name, path FROM chunks WHERE embedding IS NULL AND kind = 'function' "
            "ORDER BY length(name) DESC, name, path LIMIT 1"
        ).fetchall()[0]
        searcher = Searcher(store, model)
        assert searcher.coverage() == (embedded, chunks)
        # BM25 answers for a chunk without a vector, and hybrid fuses it in.
        bm25 = searcher.search(name, k=5, mode="bm25")
        assert (name, path) in {(h.name, h.path) for h in bm25}
        hybrid = searcher.search(name, k=5, mode="hybrid")
        assert (name, path) in {(h.name, h.path) for h in hybrid}
        # Dense search sees only the embedded chunks.
        dense_ids = {doc for doc, _ in searcher.dense(name, 1000)}
        assert len(dense_ids) == embedded
        data = found(searcher, SearchRequest(name), hybrid).as_dict()
        assert data["embedded"] == {"chunks": embedded, "of": chunks}

    again = run_index(IndexOptions(root=small_example, db=db, embed_cache=None), model)
    assert (again.files_indexed, again.files_unchanged) == (0, 5)
    assert again.chunks_embedded == chunks - embedded  # exactly the missing ones
    assert again.seconds_searchable is not None and again.seconds_searchable <= again.seconds
    with Store.open(db, read_only=True) as store:
        assert store.coverage() == (chunks, chunks)
        row = store.con.execute(
            "SELECT path, module, package, kind, name, signature, visibility, start_line, "
            "end_line, part, parts, coalesce(doc, ''), text, coalesce(header, ''), embedding "
            "FROM chunks WHERE name = ? AND path = ?",
            [name, path],
        ).fetchall()[0]
    expected = model.embed_batch([embed_text(Chunk(*row[:14]))])[0]
    assert float(np.dot(np.asarray(row[14], dtype=np.float32), expected)) > 0.999


def test_the_vectors_filled_in_behind_the_write_are_the_models_own(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """Once every page is in, each chunk holds its search text and the model's vector for
    its embed text, as embedding it on its own gives."""
    db = tmp_path / "a.duckdb"
    summary = run_index(IndexOptions(root=small_example, db=db, embed_cache=None), model)
    assert (summary.files_indexed, summary.chunks_embedded) == (5, summary.chunks)
    assert summary.seconds_searchable is not None  # the phase runs for every run
    with Store.open(db, read_only=True) as store:
        rows = store.con.execute(
            "SELECT path, module, package, kind, name, signature, visibility, start_line, "
            "end_line, part, parts, coalesce(doc, ''), text, coalesce(header, ''), "
            "search_text, embedding FROM chunks ORDER BY path, name, part"
        ).fetchall()
    assert len(rows) == summary.chunks
    chunks = [Chunk(*row[:14]) for row in rows]
    expected = model.embed_batch([embed_text(c) for c in chunks])
    for chunk, row, vector in zip(chunks, rows, expected, strict=True):
        assert row[14] == search_text(chunk)
        assert np.allclose(np.asarray(row[15], dtype=np.float32), vector, atol=1e-5)


def test_a_staged_run_shows_its_chunks_to_readers_before_the_vectors(
    small_example: Path, model: OnnxEmbedder
) -> None:
    db = small_example / ".gbr" / "index.duckdb"
    seen: list[tuple[tuple[int, int], int]] = []
    stop = threading.Event()

    def read_as_soon_as_published() -> None:
        while not stop.is_set() and not db.exists():
            stop.wait(0.005)
        if stop.is_set():
            return
        with Store.open(db, read_only=True) as store:
            seen.append((store.coverage(), len(store.bm25("isbn", 50))))

    reader = threading.Thread(target=read_as_soon_as_published)
    reader.start()
    try:
        summary = run_index(
            IndexOptions(root=small_example, db=db, staged=True, embed_cache=None),
            model,
        )
    finally:
        stop.set()
        reader.join(timeout=30)
    assert len(seen) == 1
    (embedded, chunks), bm25_hits = seen[0]
    assert chunks == summary.chunks and embedded < chunks and bm25_hits > 0
    with Store.open(db, read_only=True) as store:
        assert store.coverage() == (summary.chunks, summary.chunks)
        assert store.last_run() is not None
    assert not next_path(db).exists()


def test_a_vector_never_reaches_a_chunk_replaced_since(model: OnnxEmbedder, tmp_path: Path) -> None:
    """fill_vectors matches on the embed hash and a still-NULL vector, so a file changed
    while its old text was being embedded keeps NULL until its new text is embedded."""
    db = tmp_path / "index.duckdb"

    def source(text: str) -> tuple[SourceFile, list[StoredChunk]]:
        src = SourceFile("src/a.gleam", "a", "pkg", text.encode(), text, len(text), 0.0)
        chunk = Chunk(
            "src/a.gleam", "a", "pkg", "function", "f", "pub fn f()", "pub", 1, 1, 0, 1, "", text
        )
        return src, prepare_chunks([chunk], model)

    with Store.open(db) as store:
        store.prepare(model_id=model.model_id, chunker_version="t", dim=model.dim)
        old_src, old = source("pub fn f() { 1 }")
        store.replace_file(old_src, old)
        new_src, new = source("pub fn f() { 2 }")
        store.replace_file(new_src, new)  # replaced while the old text was embedding
        late = {old[0].embed_hash: np.ones(model.dim, dtype=np.float32)}
        assert store.fill_vectors(late) == 0
        assert store.coverage() == (0, 1)
        fresh = {new[0].embed_hash: np.ones(model.dim, dtype=np.float32)}
        assert store.fill_vectors(fresh) == 1
        assert store.fill_vectors(fresh) == 0  # already there: never written twice
        assert store.coverage() == (1, 1)


def test_an_embedder_restarted_mid_way_loses_no_vector(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """It crashes on its 2nd page and its next start fails too: the page in hand is
    redelivered to the incarnation after, and the pages go on from there."""
    faults = parse_faults("embedder@2,embedder@start2")
    assert faults is not None
    db = tmp_path / "index.duckdb"
    summary = run_index(
        IndexOptions(
            root=small_example,
            db=db,
            batch_chunks=4,
            faults=faults,
            embed_cache=None,
        ),
        model,
    )
    assert sum(faults.crashes.values()) == 2
    assert summary.restarts == 2 and summary.dead_letters == 0
    assert summary.chunks_embedded == summary.chunks
    with Store.open(db, read_only=True) as store:
        assert store.coverage() == (summary.chunks, summary.chunks)
