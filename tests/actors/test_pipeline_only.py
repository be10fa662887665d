"""Index runs restricted to changed paths, as the daemon's watcher asks for them."""

from __future__ import annotations

import threading
from pathlib import Path

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.facade import Store

ISBN = "src/bookshelf/isbn.gleam"
FFI = "src/bookshelf/ffi.gleam"
MEMBER = "src/bookshelf/member.gleam"


def names(db: Path, path: str) -> set[str]:
    with Store.open(db, read_only=True) as store:
        rows = store.con.execute("SELECT name FROM chunks WHERE path = ?", [path]).fetchall()
    return {r[0] for r in rows}


def append_function(root: Path, rel: str, name: str) -> None:
    with (root / rel).open("a") as handle:
        handle.write(f"\npub fn {name}() -> Int {{\n  42\n}}\n")


def test_only_listed_paths_are_indexed_and_a_vanished_one_is_removed(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "index.duckdb"
    first = run_index(IndexOptions(root=small_example, db=db), model)
    assert first.files_indexed == 5
    append_function(small_example, ISBN, "listed_change")
    append_function(small_example, MEMBER, "unlisted_change")
    (small_example / FFI).unlink()

    summary = run_index(IndexOptions(root=small_example, db=db, only=frozenset({ISBN, FFI})), model)

    assert (summary.files_seen, summary.files_indexed, summary.files_removed) == (1, 1, 1)
    assert "listed_change" in names(db, ISBN)
    assert names(db, FFI) == set()
    assert "unlisted_change" not in names(db, MEMBER)  # not listed, so not looked at
    with Store.open(db, read_only=True) as store:
        assert store.counts()["files"] == 4
        hits = store.bm25("listed_change", 3)
        assert hits and store.chunk_rows([hits[0][0]])[hits[0][0]].name == "listed_change"


def test_an_unchanged_listed_file_costs_a_hash(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "index.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    again = run_index(IndexOptions(root=small_example, db=db, only=frozenset({ISBN})), model)
    assert (again.files_unchanged, again.files_indexed, again.chunks_embedded) == (1, 0, 0)


def test_a_wiped_index_turns_a_restricted_run_into_a_full_one(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "index.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    with Store.open(db) as store:
        store.set_meta(chunker_version="an older chunker")
    summary = run_index(IndexOptions(root=small_example, db=db, only=frozenset({ISBN})), model)
    assert summary.reindex_reason and summary.files_indexed == 5


def test_a_cancelled_run_keeps_what_it_wrote_and_the_next_run_catches_up(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "index.duckdb"
    cancel = threading.Event()
    cancel.set()
    cut = run_index(IndexOptions(root=small_example, db=db, cancel=cancel), model)
    assert cut.files_indexed <= 5
    rest = run_index(IndexOptions(root=small_example, db=db), model)
    # Files in flight at the cancel may land after the count, so the sum is not asserted.
    assert rest.files_indexed + rest.files_unchanged == 5
    with Store.open(db, read_only=True) as store:
        assert store.counts()["files_ok"] == 5 and store.has_fulltext()
        assert not store.fulltext_stale()
