"""Chunk rows held in memory by a serving searcher: the same rows, node parts and hits as
DuckDB gives, rows written after they were read still found, and the budget respected.

Real pipeline on the bookshelf example (it has functions split into several parts), real
DuckDB file, real model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.search import Filter, Searcher
from gbr.core.records import MODES
from gbr.core.store.facade import Store
from tests.conftest import Indexed
from tests.core.test_store import source, stored

QUERIES = (
    "check that an ISBN is valid",
    "how are overdue fines calculated",
    "route an HTTP request to its handler",
    "levenshtein edit distance between two strings",
    "isbn10_check_digit",
    "LoanError",
)
BIG = 1 << 30


@pytest.fixture(scope="module")
def indexed(indexed_example_template: Indexed) -> Path:
    """The bookshelf's index of the session; each test copies it."""
    return indexed_example_template.root / ".gbr" / "index.duckdb"


@pytest.fixture
def db(indexed: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "index.duckdb"
    shutil.copyfile(indexed, copy)
    return copy


def all_ids(store: Store) -> list[int]:
    return [int(i) for (i,) in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]


def test_held_rows_and_node_parts_are_what_duckdb_reads(db: Path) -> None:
    with Store.open(db, read_only=True) as store:
        held = store.memory_rows(BIG)
        assert held is not None
        ids = all_ids(store)
        want = store.chunk_rows(ids)
        got, missing = held.rows([*reversed(ids), 10**12])
        assert got == want and missing == [10**12]
        split = [row for row in want.values() if row.parts > 1]
        assert len({(r.path, r.name) for r in split}) >= 2  # the example has split nodes
        parts = store.nodes_parts(list({(r.path, r.kind, r.name): 0 for r in split}))
        for row in split:
            assert held.parts(row) == parts[(row.path, row.kind, row.name)]


def test_a_node_missing_a_part_is_left_to_duckdb(db: Path) -> None:
    """Held parts are all of a node's or nothing: a node short of a part gets None."""
    with Store.open(db) as store:
        (gone, path, name) = store.con.execute(
            "SELECT id, path, name FROM chunks WHERE parts > 1 AND part = 1 LIMIT 1"
        ).fetchall()[0]
        store.con.execute("DELETE FROM chunks WHERE id = ?", [gone])
        held = store.memory_rows(BIG)
        assert held is not None
        rows, _ = held.rows(all_ids(store))
        first = next(r for r in rows.values() if (r.path, r.name, r.part) == (path, name, 0))
        assert held.parts(first) is None


def test_a_searcher_holding_rows_answers_as_one_that_reads_duckdb(
    db: Path, model: OnnxEmbedder
) -> None:
    """Same hits, in the same order, with the same text and lines (split nodes widened),
    in every mode and with a filter; then a file written after the rows were read is
    found with its own row, and a reload holds it."""
    filters = (Filter(), Filter(path="src/bookshelf/loan"), Filter(kinds=("function",)))
    with Store.open(db) as store:
        plain = Searcher(store, model)
        holding = Searcher(store, model, postings_budget=BIG)
        assert holding.postings_in_memory(timeout=60) and holding._rows is not None
        split = {
            n for (n,) in store.con.execute("SELECT name FROM chunks WHERE parts > 1").fetchall()
        }
        widened = 0
        for query in QUERIES:
            for mode in MODES:
                for where in filters:
                    want = [h.as_dict() for h in plain.search(query, 10, mode, where)]
                    got = [h.as_dict() for h in holding.search(query, 10, mode, where)]
                    assert got == want, (query, mode, where)
                    widened += sum(h["name"] in split for h in got)
        assert widened  # some hits were split nodes, widened from the held parts
        new = source("pub fn quokka_census(n: Int) -> Int {\n  n * 2\n}\n", "src/zoo.gleam")
        store.replace_file(new, stored(new, model))
        store.update_fulltext()
        hits = holding.search("quokka census", 5, "bm25")  # its row is not held: DuckDB's
        assert (hits[0].name, hits[0].text) == ("quokka_census", new.content.decode().strip())
        holding.reload()
        assert holding.postings_in_memory(timeout=60)
        ((new_id,),) = store.con.execute(
            "SELECT id FROM chunks WHERE name = 'quokka_census'"
        ).fetchall()
        assert holding._rows is not None and new_id in holding._rows.rows([new_id])[0]


def test_rows_over_the_budget_stay_in_duckdb(db: Path, model: OnnxEmbedder) -> None:
    """What the postings leave of the budget is what the rows may take."""
    with Store.open(db, read_only=True) as store:
        assert store.memory_rows(1000) is None
        postings = store.memory_postings(BIG)
        assert postings is not None
        tight = Searcher(store, model, postings_budget=postings.nbytes + 1000)
        assert tight.postings_in_memory(timeout=60) and tight._rows is None
        plain = Searcher(store, model)
        for query in QUERIES:
            want = [h.as_dict() for h in plain.search(query, 10)]
            assert [h.as_dict() for h in tight.search(query, 10)] == want
