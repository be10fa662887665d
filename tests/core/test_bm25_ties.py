"""Issue 32 item 14: BM25 orders tied documents the same way every time.

Equal documents (a file copied, a function repeated) tie, but their scores were sums taken
in whatever order DuckDB's threads or numpy took the terms, a few ulps apart, and ties went
by chunk id, which an index hands out in the order files are written (two parsers race, so
a rebuild writes them in another order): the order of tied hits changed from run to run,
between DuckDB and the postings a daemon holds, and across rebuilds. Scores are now rounded
and ties go by the chunk's place in the tree. Real chunker, model and DuckDB.
"""

from __future__ import annotations

from pathlib import Path

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunk_text import code_words
from gbr.core.parse.chunker import CHUNKER_VERSION
from gbr.core.store.facade import Store
from tests.core.test_store import source, stored

TIED = """/// Compute the overdue fine for a late library loan, in cents.
pub fn overdue_fine(days: Int, rate: Int) -> Int {
  days * rate + 0
}
"""
PATHS = [f"src/tie/m{n:02}.gleam" for n in range(1, 9)]
QUERY = code_words("overdue fine late loan cents")


def index_in_order(db: Path, paths: list[str], model: OnnxEmbedder) -> None:
    """Copies of one file written in the order given, as a run's writer would."""
    with Store.open(db) as store:
        store.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim)
        for path in paths:
            store.replace_file(source(TIED, path), stored(source(TIED, path), model))
        store.refresh_fulltext()


def tied_paths(db: Path) -> list[list[str]]:
    """The best hits' paths as DuckDB ranks them (three times), and as held postings do."""
    with Store.open(db, read_only=True) as store:
        paths = dict(store.con.execute("SELECT id, path FROM chunks").fetchall())
        held = store.memory_postings(budget=1 << 30)
        assert held is not None
        rankings = [store.bm25(QUERY, 50) for _ in range(3)]
        rankings.append(held.top(store.query_terms(QUERY), 50))
    return [[paths[i] for i, score in ranking if score == ranking[0][1]] for ranking in rankings]


def test_tied_documents_keep_one_order_every_time_and_across_rebuilds(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    shuffled = PATHS[3:] + PATHS[:3][::-1]  # what another run's race might write first
    for label, order in (("in order", PATHS), ("shuffled", shuffled), ("reversed", PATHS[::-1])):
        db = tmp_path / f"{label}.duckdb"
        index_in_order(db, order, model)
        for ranking in tied_paths(db):
            assert ranking == PATHS, label
