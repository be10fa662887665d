"""The DuckDB store: atomic replace, stale marking, removal, version changes, cache, BM25."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import numpy as np
import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import StoreError
from gbr.core.parse.chunker import CHUNKER_VERSION, chunk_file, new_parser
from gbr.core.records import ChunkRow, FileProblem, SearchFilter, SourceFile
from gbr.core.store.facade import FileWrite, Store, StoredChunk
from gbr.core.store.indexing import embed_now

V1 = """/// Add one to a number.
pub fn increment(x: Int) -> Int {
  x + 1
}

pub fn decrement(x: Int) -> Int {
  x - 1
}
"""
V2 = """/// Multiply a number by two.
pub fn double(x: Int) -> Int {
  x * 2
}
"""


def source(text: str, path: str = "src/calc.gleam") -> SourceFile:
    data = text.encode()
    return SourceFile(
        path=path,
        module=path.removeprefix("src/").removesuffix(".gleam"),
        package="calc",
        content=data,
        content_hash=hashlib.sha256(data).hexdigest(),
        size=len(data),
        mtime=0.0,
    )


def stored(src: SourceFile, model: OnnxEmbedder) -> list[StoredChunk]:
    chunks = chunk_file(src, new_parser(), model.count_tokens)
    assert isinstance(chunks, list)
    items = embed_now(chunks, model)
    return items


@pytest.fixture
def store(tmp_path: Path, model: OnnxEmbedder) -> Store:
    s = Store.open(tmp_path / "index.duckdb")
    assert (
        s.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim) is None
    )
    return s


def names(store: Store, path: str = "src/calc.gleam") -> list[str]:
    rows = store.con.execute(
        "SELECT name FROM chunks WHERE path = ? ORDER BY start_line", [path]
    ).fetchall()
    return [r[0] for r in rows]


def test_replace_file_swaps_old_chunks_for_new(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    assert names(store) == ["increment", "decrement"]
    store.replace_file(source(V2), stored(source(V2), model))
    assert names(store) == ["double"]
    assert store.file_states()["src/calc.gleam"].content_hash == source(V2).content_hash


def test_failed_replace_rolls_back_and_keeps_the_old_version(
    store: Store, model: OnnxEmbedder
) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    good = stored(source(V2), model)
    # A vector of the wrong width makes the INSERT fail after the DELETE ran.
    broken = [StoredChunk(good[0].chunk, "x", 1, "h", np.zeros(7, dtype=np.float32))]
    # A DuckDB error leaves the store as ours: one line, ending with what to do.
    with pytest.raises(StoreError, match=r"failed: .*; run again with --debug"):
        store.replace_file(source(V2), broken)
    assert names(store) == ["increment", "decrement"]
    assert store.file_states()["src/calc.gleam"].content_hash == source(V1).content_hash


def test_mark_failed_keeps_earlier_chunks_as_stale(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    problem = FileProblem("src/calc.gleam", "syntax error at line 2", "parse_failed", line=2)
    kept = store.mark_failed(problem, source("pub fn (", "src/calc.gleam"))
    assert kept == 2
    assert store.counts()["stale_chunks"] == 2
    [failed] = store.failed_files()
    assert failed.error == "syntax error at line 2"
    assert failed.stale_chunks == 2
    assert store.file_states()["src/calc.gleam"].status == "failed"


def test_remove_files_deletes_chunks_and_file_row(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    store.replace_file(source(V2, "src/other.gleam"), stored(source(V2, "src/other.gleam"), model))
    assert store.remove_files(["src/calc.gleam"]) == 1
    assert names(store) == []
    assert set(store.file_states()) == {"src/other.gleam"}


def test_model_change_wipes_the_index_and_says_why(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    reason = store.prepare(model_id="other-model", chunker_version=CHUNKER_VERSION, dim=model.dim)
    assert reason is not None and "model id changed" in reason and "other-model" in reason
    assert store.counts()["chunks"] == 0
    assert (
        store.prepare(model_id="other-model", chunker_version=CHUNKER_VERSION, dim=model.dim)
        is None
    )


def test_chunker_change_forces_reindex(store: Store, model: OnnxEmbedder) -> None:
    reason = store.prepare(model_id=model.model_id, chunker_version="old", dim=model.dim)
    assert reason is not None and "chunker version" in reason


def test_cached_vectors_returns_stored_vectors_by_text_hash(
    store: Store, model: OnnxEmbedder
) -> None:
    items = stored(source(V1), model)
    store.replace_file(source(V1), items)
    found = store.cached_vectors([items[0].embed_hash, "unknown"])
    assert set(found) == {items[0].embed_hash}
    np.testing.assert_allclose(found[items[0].embed_hash], items[0].vector, rtol=1e-6)


def test_bm25_finds_identifiers_after_refresh(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    store.refresh_fulltext()
    hits = store.bm25("decrement", 5)
    rows = store.chunk_rows([doc for doc, _ in hits])
    assert rows[hits[0][0]].name == "decrement"


def test_read_only_open_of_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="run `gleambrctl index` first"):
        Store.open(tmp_path / "nope.duckdb", read_only=True)


def test_vectors_are_unit_length(store: Store, model: OnnxEmbedder) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    ids, matrix = store.vectors()
    assert len(ids) == 2
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)


def test_no_connection_draws_a_progress_bar(store: Store) -> None:
    """DuckDB would draw it on stdout, which is the protocol channel of `gleambrctl mcp`."""
    for con in (store, store.cursor()):
        ((on,),) = con.con.execute("SELECT current_setting('enable_progress_bar')").fetchall()
        assert on is False


def test_duckdb_loads_only_the_extensions_gbr_names(store: Store) -> None:
    """Unsigned files are allowed (the fts file's signature check cost 80-90 ms a
    connection), so DuckDB must load nothing on its own: neither a known extension a
    statement would need nor one from its own extension folder."""
    settings = store.con.execute(
        "SELECT current_setting('autoload_known_extensions'), "
        "current_setting('autoinstall_known_extensions')"
    ).fetchall()
    assert settings == [(False, False)]
    ((fts,),) = store.con.execute(
        "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'fts'"
    ).fetchall()
    assert fts is True
    with pytest.raises(duckdb.Error, match=r"(?i)spatial"):
        store.con.execute("SELECT ST_Point(1, 2)").fetchall()
    ((spatial,),) = store.con.execute(
        "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'spatial'"
    ).fetchall()
    assert spatial is False


def test_filters_are_data_bound_as_values_never_pasted_into_sql(
    store: Store, model: OnnxEmbedder
) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    store.replace_file(source(V2, "src/other.gleam"), stored(source(V2, "src/other.gleam"), model))
    store.refresh_fulltext()
    assert store.any_chunk(SearchFilter(module="calc")) and store.modules() == ["calc", "other"]
    assert store.folders() == ["src/"]
    # Quotes in a value are a value: they match nothing, and they break no query.
    sneaky = SearchFilter(module="x' OR true OR '", path="src/' OR '1'='1", kinds=("')--",))
    assert not store.any_chunk(sneaky)
    assert store.ids_matching(sneaky) == [] and store.bm25("double", 5, sneaky) == []
    [(doc, _)] = store.bm25("double", 5, SearchFilter(path="src/other"))
    row = store.chunk_rows([doc])[doc]
    assert isinstance(row, ChunkRow) and (row.path, row.name, row.stale) == (
        "src/other.gleam",
        "double",
        False,
    )


def test_a_duckdb_error_on_a_read_is_one_line_of_ours_with_the_fix(store: Store) -> None:
    store.con.close()  # the connection is gone under the store: every query fails in DuckDB
    for read in (store.counts, store.file_states, store.vectors, lambda: store.chunk_rows([1])):
        with pytest.raises(StoreError) as info:
            read()
        message = str(info.value)
        assert "\n" not in message and message.endswith("if it keeps failing")
        assert f"`gleambrctl index --rebuild --db {store.path} PATH`" in message
        assert isinstance(info.value.__cause__, duckdb.Error)  # kept for --debug


def test_files_replaced_together_store_what_one_by_one_stores(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    files = [source(V1), source(V2, "src/other.gleam"), source("", "src/empty.gleam")]
    query = (
        "SELECT c.path, c.name, c.search_text, c.embedding, f.content_hash, f.status "
        "FROM chunks c JOIN files f USING (path) ORDER BY c.path, c.start_line"
    )
    tables: list[list[tuple[object, ...]]] = []
    for name in ("apart", "together"):
        s = Store.open(tmp_path / f"{name}.duckdb")
        s.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim)
        writes = [FileWrite(f, stored(f, model)) for f in files]
        if name == "apart":
            for w in writes:
                s.replace_file(w.source, w.chunks)
        else:
            assert s.replace_files(writes) == [0, 0, 0]
        tables.append(s.con.execute(query).fetchall())
        assert s.counts()["files"] == 3
        s.close()
    assert tables[0] == tables[1] and len(tables[0]) == 3


def test_a_batch_swaps_old_versions_and_keeps_a_partial_files_good_version(
    store: Store, model: OnnxEmbedder
) -> None:
    store.replace_file(source(V1), stored(source(V1), model))
    store.replace_file(source(V2, "src/other.gleam"), stored(source(V2, "src/other.gleam"), model))
    broken = FileProblem("src/other.gleam", "syntax error at line 2", "syntax")
    kept = store.replace_files(
        [
            FileWrite(source(V2), stored(source(V2), model)),
            FileWrite(source(V1, "src/other.gleam"), [], partial=broken),
        ]
    )
    assert kept == [0, 1]  # the partial file keeps its last good version, stale
    assert names(store) == ["double"]
    assert names(store, "src/other.gleam") == ["double"]
    stale = store.con.execute("SELECT bool_and(stale) FROM chunks WHERE path = 'src/other.gleam'")
    assert stale.fetchall() == [(True,)]


def test_the_parts_of_several_split_nodes_come_back_in_one_call_in_order(
    store: Store, model: OnnxEmbedder
) -> None:
    def big(name: str) -> str:
        lets = "".join(f"  let {name}_{i} = x + {i}\n" for i in range(120))
        return f"pub fn {name}(x: Int) -> Int {{\n{lets}  x\n}}\n"

    src = source(big("alpha") + "\n" + big("bravo"))
    items = stored(src, model)
    store.replace_file(src, items)
    got = store.nodes_parts(
        [
            ("src/calc.gleam", "function", "bravo"),
            ("src/calc.gleam", "function", "alpha"),
            ("src/calc.gleam", "function", "missing"),
        ]
    )
    assert set(got) == {("src/calc.gleam", "function", n) for n in ("alpha", "bravo")}
    for name in ("alpha", "bravo"):
        parts = got[("src/calc.gleam", "function", name)]
        mine = [i.chunk for i in items if i.chunk.name == name]
        assert len(parts) == len(mine) > 1
        assert [p.part for p in parts] == list(range(len(parts)))
        assert [p.text for p in parts] == [c.text for c in mine]


def test_a_file_twice_in_one_batch_keeps_its_last_version(
    store: Store, model: OnnxEmbedder
) -> None:
    store.replace_files(
        [
            FileWrite(source(V1), stored(source(V1), model)),
            FileWrite(source(V2), stored(source(V2), model)),
        ]
    )
    assert names(store) == ["double"]
    assert store.counts()["files"] == 1
