"""The vector file beside the index: served only for the index it was made from, rebuilt
when stale or damaged, and searching through it ranks exactly as DuckDB's own vectors do."""

from __future__ import annotations

import shutil
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.search import Filter, Searcher
from gbr.core.records import MODES
from gbr.core.store import vector_file
from gbr.core.store.facade import Store, ThreadLocalStore
from tests.conftest import copy_small
from tests.core.test_store import V1, V2, source, stored

QUERIES = (
    "check that an ISBN is valid",
    "member borrowing limits",
    "isbn10_check_digit",
    "read configuration",
    "MemberId",
)
# Rows come out of the file bit for bit as DuckDB holds them, so scores are equal; the
# tolerance only allows for a BLAS that sums in another order on another machine.
SCORE_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    """The small example indexed once, through the real pipeline."""
    root = copy_small(tmp_path_factory.mktemp("vectors") / "small")
    db = root / ".gbr" / "index.duckdb"
    run_index(IndexOptions(root=root, db=db), model)
    return db


@pytest.fixture
def db(indexed: Path, tmp_path: Path) -> Path:
    """A private copy of the index, without a vector file yet."""
    copy = tmp_path / "index.duckdb"
    shutil.copyfile(indexed, copy)
    return copy


def test_mapped_vectors_equal_duckdbs_bit_for_bit_and_come_from_the_file(db: Path) -> None:
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        ids, rows = store.vectors()
        assert not file.exists()
        built_ids, built = store.vectors(file)  # missing: read from DuckDB, then written
        assert file.is_file()
        mapped_ids, mapped = store.vectors(file)
    assert isinstance(mapped, np.memmap)
    assert not isinstance(built, np.memmap)
    for got_ids, got in ((built_ids, built), (mapped_ids, mapped)):
        np.testing.assert_array_equal(got_ids, ids)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(got), rows)


def test_search_through_the_file_ranks_as_search_from_duckdb(db: Path, model: OnnxEmbedder) -> None:
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        store.vectors(file)  # written by a first reader
        plain = Searcher(store, model)
        mapped = Searcher(store, model, vector_file=file)
        mapped.reload()
        assert isinstance(mapped._vectors()[1], np.memmap)
        filters = (Filter(), Filter(path="src/bookshelf/isbn"), Filter(kinds=("function",)))
        for query in QUERIES:
            for mode in MODES:
                for where in filters:
                    want = plain.search(query, 10, mode, where)
                    got = mapped.search(query, 10, mode, where)
                    assert [(h.path, h.name, h.start_line) for h in got] == [
                        (h.path, h.name, h.start_line) for h in want
                    ], (query, mode, where)
                    np.testing.assert_allclose(
                        [h.score for h in got], [h.score for h in want], atol=SCORE_TOLERANCE
                    )


def test_a_file_made_for_another_state_of_the_index_is_not_served(
    db: Path, model: OnnxEmbedder
) -> None:
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        old_ids, _ = store.vectors(file)
    with Store.open(db) as writer:
        writer.replace_file(source(V1), stored(source(V1), model))
    with Store.open(db, read_only=True) as store:
        ids, rows = store.vectors(file)
        want_ids, want = store.vectors()
    assert len(ids) == len(old_ids) + 2
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(np.asarray(rows), want)


def test_a_rebuilt_index_with_the_same_ids_gets_its_own_vectors(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    """A new file's sequence starts over: same ids, other vectors. Only the generation
    that its writer recorded tells the two apart."""

    def build(path: Path, text: str) -> tuple[np.ndarray, np.ndarray]:
        with Store.open(path) as store:
            store.prepare(model_id=model.model_id, chunker_version="t", dim=model.dim)
            store.replace_file(source(text), stored(source(text), model))
        with Store.open(path, read_only=True) as store:
            return store.vectors(vector_file.file_for(path))

    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    ids_a, rows_a = build(first, V1)
    ids_b, rows_b = build(second, V1.replace("Add one to", "Add one more to"))
    np.testing.assert_array_equal(ids_a, ids_b)
    assert not np.array_equal(np.asarray(rows_a), np.asarray(rows_b))
    shutil.copyfile(vector_file.file_for(first), vector_file.file_for(second))
    with Store.open(second, read_only=True) as store:
        _, rows = store.vectors(vector_file.file_for(second))
        assert not isinstance(rows, np.memmap)  # not served: rebuilt from DuckDB
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(rows_b))
    served = vector_file.load(vector_file.file_for(second), store_fingerprint(second))
    assert served is not None  # the file now holds this index's vectors
    np.testing.assert_array_equal(np.asarray(served[1]), np.asarray(rows_b))


def store_fingerprint(db: Path) -> vector_file.Fingerprint:
    from gbr.core.store.vectors import fingerprint

    with Store.open(db, read_only=True) as store:
        return fingerprint(store.con)


def _damage_truncate(file: Path) -> None:
    with open(file, "r+b") as handle:
        handle.truncate(file.stat().st_size - 4)


def _damage_header(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[20] ^= 0xFF
    file.write_bytes(bytes(data))


def _damage_ids(file: Path) -> None:
    with open(file, "rb") as handle:
        header = vector_file.read_header(handle, file.stat().st_size)
    data = bytearray(file.read_bytes())
    data[int(str(header["ids_offset"]))] ^= 0x01
    file.write_bytes(bytes(data))


def _damage_everything(file: Path) -> None:
    file.write_bytes(b"\0" * 100)


@pytest.mark.parametrize(
    "damage", [_damage_truncate, _damage_header, _damage_ids, _damage_everything]
)
def test_a_damaged_file_is_rebuilt(db: Path, damage: object) -> None:
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        want_ids, want = store.vectors()
        store.vectors(file)
        good = file.read_bytes()
        damage(file)  # type: ignore[operator]
        ids, rows = store.vectors(file)
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(np.asarray(rows), want)
        assert file.read_bytes() == good
        assert isinstance(store.vectors(file)[1], np.memmap)


def test_a_folder_that_takes_no_file_still_gets_its_vectors(db: Path) -> None:
    nowhere = db.parent / "missing-folder" / "index.duckdb.vectors"
    with Store.open(db, read_only=True) as store:
        ids, rows = store.vectors(nowhere)
        want_ids, want = store.vectors()
    assert not nowhere.parent.exists()
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(rows, want)


def test_an_index_without_chunks_needs_no_file(tmp_path: Path, model: OnnxEmbedder) -> None:
    db = tmp_path / "empty.duckdb"
    with Store.open(db) as store:
        store.prepare(model_id=model.model_id, chunker_version="t", dim=model.dim)
    with Store.open(db, read_only=True) as store:
        ids, _ = store.vectors(vector_file.file_for(db))
    assert ids.shape == (0,)
    assert not vector_file.file_for(db).exists()


def test_each_writing_session_that_changes_chunks_records_a_new_generation(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    db = tmp_path / "index.duckdb"
    generations = []
    for text in (V1, V2):
        with Store.open(db) as store:
            store.prepare(model_id=model.model_id, chunker_version="t", dim=model.dim)
            store.replace_file(source(text), stored(source(text), model))
            store.replace_file(
                source(text, "src/b.gleam"), stored(source(text, "src/b.gleam"), model)
            )
            generations.append(store.meta()["vectors_generation"])
    assert generations[0] != generations[1]


def test_a_staged_index_run_leaves_a_file_that_the_next_search_maps(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    root = copy_small(tmp_path / "small")
    db = root / ".gbr" / "index.duckdb"
    file = vector_file.file_for(db)
    run_index(IndexOptions(root=root, db=db, staged=True), model)
    first = file.stat().st_ino
    with Store.open(db, read_only=True) as store:
        assert store.mapped_vectors(file) is not None
    isbn = root / "src/bookshelf/isbn.gleam"
    isbn.write_text(isbn.read_text() + "\npub fn added_for_the_test() -> Int {\n  42\n}\n")
    (root / "src/bookshelf/ffi.gleam").unlink()
    run_index(IndexOptions(root=root, db=db, staged=True), model)
    assert file.stat().st_ino != first  # written again, for the new index
    with Store.open(db, read_only=True) as store:
        found = store.mapped_vectors(file)
        want_ids, want = store.vectors()
        names = store.con.execute("SELECT count(*) FROM chunks WHERE path LIKE '%ffi%'").fetchall()
    assert found is not None
    assert names == [(0,)]
    np.testing.assert_array_equal(found[0], want_ids)
    np.testing.assert_array_equal(np.asarray(found[1]), want)


def test_a_refresh_given_another_indexs_vectors_still_writes_this_ones(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    """Rows are carried over only from the index this one was copied from; vectors of
    another index at the same ids are caught by the spot check and read again."""
    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for path, text in ((first, V1), (second, V1.replace("Add one to", "Add one more to"))):
        with Store.open(path) as store:
            store.prepare(model_id=model.model_id, chunker_version="t", dim=model.dim)
            store.replace_file(source(text), stored(source(text), model))
            store.replace_file(source(V2, "src/b.gleam"), stored(source(V2, "src/b.gleam"), model))
    with Store.open(first, read_only=True) as store:
        other = store.vectors()
    with Store.open(second, read_only=True) as store:
        store.refresh_vectors(vector_file.file_for(second), other)
        found = store.mapped_vectors(vector_file.file_for(second))
        want = store.vectors()
    assert found is not None
    np.testing.assert_array_equal(found[0], want[0])
    np.testing.assert_array_equal(np.asarray(found[1]), want[1])
    assert not np.array_equal(want[1], other[1])


def test_hybrid_asks_both_lists_at_once_and_gets_what_one_after_the_other_gives(
    db: Path, model: OnnxEmbedder
) -> None:
    """The dense half runs on a worker thread while BM25 runs on the caller's connection;
    the lists must be the ones the two asked in turn give, also under a filter, and also
    with many threads searching one store's cursors at once (as the daemon does)."""
    filters = (Filter(), Filter(path="src/bookshelf/isbn"), Filter(kinds=("function",)))
    with Store.open(db, read_only=True) as base:
        store = ThreadLocalStore(base)
        searcher = Searcher(store, model, vector_file=vector_file.file_for(db))

        def both_ways(query: str, where: Filter) -> None:
            got = searcher.retrieve(query, "hybrid", where, depth=20)
            dense, bm25 = searcher.dense(query, 20, where), searcher.bm25(query, 20, where)
            assert [d for d, _ in dense] == list(got.dense)
            assert [d for d, _ in bm25] == list(got.bm25)
            np.testing.assert_allclose(
                [s for s, _ in got.dense.values()], [s for _, s in dense], atol=SCORE_TOLERANCE
            )

        with ThreadPoolExecutor(4) as pool:
            jobs = [pool.submit(both_ways, q, w) for q in QUERIES for w in filters for _ in (1, 2)]
            for job in jobs:
                job.result(timeout=120)
        store.close_cursors()


def test_a_searcher_holding_the_postings_ranks_as_one_asking_duckdb_and_follows_a_reload(
    db: Path, model: OnnxEmbedder
) -> None:
    """Held postings answer unfiltered BM25 (and so hybrid); a filter still asks DuckDB.
    After the index changes, a reload drops the old postings and loads the new state's."""
    filters = (Filter(), Filter(path="src/bookshelf/isbn"), Filter(kinds=("function",)))
    with Store.open(db) as store:
        plain = Searcher(store, model)
        holding = Searcher(store, model, postings_budget=1 << 30)
        assert holding.postings_in_memory(timeout=60)
        for query in QUERIES:
            for mode in MODES:
                for where in filters:
                    want = plain.search(query, 10, mode, where)
                    got = holding.search(query, 10, mode, where)
                    assert [(h.path, h.name) for h in got] == [(h.path, h.name) for h in want]
                    np.testing.assert_allclose(
                        [h.score for h in got], [h.score for h in want], atol=1e-9
                    )
        new = source("pub fn quokka_census(n: Int) -> Int {\n  n\n}\n", "src/zoo.gleam")
        store.replace_file(new, stored(new, model))
        store.update_fulltext()
        # Its held postings are of the old state now: DuckDB answers until the reload.
        assert [h.name for h in holding.search("quokka census", 5, "bm25")][:1] == ["quokka_census"]
        holding.reload()
        assert holding.postings_in_memory(timeout=60)
        assert [h.name for h in holding.search("quokka census", 5, "bm25")][:1] == ["quokka_census"]
        small = Searcher(store, model, postings_budget=100)
        assert not small.postings_in_memory(timeout=60)  # over its budget: DuckDB scores
        assert [h.name for h in small.search("quokka census", 5, "bm25")][:1] == ["quokka_census"]


def test_a_writing_session_that_changes_no_chunk_keeps_the_generation_and_the_file(
    db: Path, model: OnnxEmbedder
) -> None:
    """A no-op `index` (or a daemon's start-up pass) must not make the vector file stale."""
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        store.vectors(file)
        before = store.meta()["vectors_generation"]
    with Store.open(db) as store:
        assert store.prepare(**_meta(store)) is None
        store.set_meta(last_run="{}")
    with Store.open(db, read_only=True) as store:
        assert store.meta()["vectors_generation"] == before
        assert isinstance(store.vectors(file)[1], np.memmap)  # still served, not rebuilt


def _meta(store: Store) -> dict[str, object]:
    """The index's own model and chunker settings, as the run that wrote it recorded."""
    have = store.meta()
    return {
        "model_id": have["model_id"],
        "chunker_version": have["chunker_version"],
        "dim": int(have["dim"]),
        "embed_format": have["embed_format"],
    }


def test_a_searcher_that_does_not_write_maps_a_good_file_and_reads_duckdb_otherwise(
    db: Path, model: OnnxEmbedder
) -> None:
    """The daemon's searcher: a good file is mapped, a missing or stale one is not
    rewritten at every reload, and the vectors come from DuckDB instead."""
    file = vector_file.file_for(db)
    with Store.open(db) as store:
        reader = Searcher(store, model, vector_file=file, write_vector_file=False)
        reader.reload()
        assert not file.exists() and not isinstance(reader._vectors()[1], np.memmap)
        want = [h.name for h in reader.search("check that an ISBN is valid", 5)]
        store.vectors(file)  # a CLI search writes it
        reader.reload()
        assert isinstance(reader._vectors()[1], np.memmap)
        assert [h.name for h in reader.search("check that an ISBN is valid", 5)] == want
        store.replace_file(
            source(V2, "src/other.gleam"), stored(source(V2, "src/other.gleam"), model)
        )
        stamp = file.stat().st_mtime_ns
        reader.reload()
        assert not isinstance(reader._vectors()[1], np.memmap)
        assert file.stat().st_mtime_ns == stamp  # stale, left for a reader that writes
        assert reader.coverage()[0] == reader.coverage()[1] == store.chunk_count()


def test_closing_a_searcher_ends_its_background_read_before_the_store_closes(
    db: Path, model: OnnxEmbedder
) -> None:
    """The loader is not a daemon thread (one killed inside DuckDB at exit aborts the
    process): `close` interrupts it and waits, so the store can close right after."""
    with Store.open(db) as store:
        for _ in range(3):
            searcher = Searcher(store, model, postings_budget=1 << 30)
            searcher.reload()
            searcher.reload()  # the first load is interrupted or replaced, never kept
            searcher.close()
            assert not [t for t in threading.enumerate() if t.name == "gbr-postings"]
        again = Searcher(store, model, postings_budget=1 << 30)
        assert again.postings_in_memory(timeout=60)
        again.close()


def test_coverage_reads_a_good_vector_file_and_counts_when_vectors_are_missing(
    db: Path, model: OnnxEmbedder
) -> None:
    """`status` at 1M chunks spent 2-5 s counting the embedding column: a good file says
    every chunk has its vector; without one (or with vectors still missing) it counts."""
    file = vector_file.file_for(db)
    with Store.open(db) as store:
        n = store.chunk_count()
        assert store.coverage() == (n, n) and not file.exists()
        store.vectors(file)
        assert store.coverage() == (n, n)
        new = source("pub fn quokka(n: Int) -> Int {\n  n\n}\n", "src/zoo.gleam")
        pending = [replace(c, vector=None) for c in stored(new, model)]
        store.replace_file(new, pending)
        assert store.coverage() == (n, n + len(pending))  # the file is stale now: counted


def test_a_file_of_the_first_format_is_out_of_date_not_damaged(db: Path) -> None:
    """A file an older gbr wrote (no checksum of its rows) is rewritten without a warning."""
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store:
        store.vectors(file)
        with open(file, "rb") as handle:
            header = vector_file.read_header(handle, file.stat().st_size)
        assert header["format"] == vector_file.FORMAT
        data = bytearray(file.read_bytes())
        _, length, _ = struct.unpack("<8sII", data[:16])
        old = data[16 : 16 + length].replace(b'"format": 2', b'"format": 1')
        data[8:16] = struct.pack("<II", length, zlib.crc32(bytes(old)))
        data[16 : 16 + length] = old
        file.write_bytes(bytes(data))
        with capture_logs() as events:
            assert store.mapped_vectors(file) is None
            store.vectors(file)
        assert not [e for e in events if e["event"] == "vector_file_damaged"]
        assert isinstance(store.vectors(file)[1], np.memmap)


def test_a_vector_that_is_not_finite_in_the_index_is_left_out_of_dense_search(
    db: Path,
) -> None:
    """Only a hand-edited index holds one: it is never scored (no 0.0, no numpy warning)."""
    with Store.open(db) as store:
        first = int(store.con.execute("SELECT min(id) FROM chunks").fetchone()[0])
        dim = int(store.meta()["dim"])
        store.con.execute(
            f"UPDATE chunks SET embedding = list_transform(range({dim}), x -> 'nan'::FLOAT)"
            f"::FLOAT[{dim}]"
            " WHERE id = ?",
            [first],
        )
    file = vector_file.file_for(db)
    with Store.open(db, read_only=True) as store, capture_logs() as events:
        count = store.chunk_count()
        ids, rows = store.vectors(file)
    assert first not in ids and ids.shape[0] == count - 1
    assert np.isfinite(np.asarray(rows)).all()
    assert [e["event"] for e in events].count("vectors_not_finite") == 1
