"""BM25 from postings held in memory, for a searcher that answers many queries.

The postings table (gbr.core.store.postings) lets DuckDB read only the documents holding a query's
terms, but a query still pays for two joins with the documents table and a grouped sum:
25-90 ms at 100k chunks here, most of a warm hybrid query. A daemon answers thousands of
queries from one state of the index, so it reads the postings once into two arrays sorted
by term, with each posting's length-normalised term-frequency factor computed up front;
a query is then one slice per term and one `bincount` (a few ms, most of it the SQL that
turns the query into its term ids with the index's own tokenizer and stemmer).

Scores use the formula of `postings.top` (and of the extension's `match_bm25`) in float64;
they may differ from DuckDB's in the last bits because the sum runs in another order, so
both round them (`postings.SCORE_DECIMALS`) and order ties by the chunk's place in the tree
(`postings.TIE_ORDER`), held here as one rank per document.
Memory: 12 bytes a posting (about 30 MB at 100k chunks of real code), 4 a document, and the
vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np

from gbr.core.store import postings
from gbr.core.store.fulltext import FTS_SCHEMA

BYTES_PER_POSTING = 12  # a row number (int32) and a weight (float64)
# What a searcher that answers many queries (the daemon's, chat's, `search -`'s) may spend:
# ~30 MB at 100k chunks, ~300 MB at 1M (loaded in 5 s, behind a reload; BM25 then takes
# 14 ms there instead of DuckDB's few hundred). A bigger index is scored by DuckDB.
SERVING_BUDGET = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MemoryPostings:
    """One index state's postings: for term id t, rows `starts[t]:starts[t+1]` of `docs`
    (document rows) and `weights` (BM25's term-frequency factor)."""

    starts: np.ndarray  # int64, one more than the largest term id + 1
    docs: np.ndarray  # int32 row into `chunk_ids`
    weights: np.ndarray  # float64
    chunk_ids: np.ndarray  # int64, the chunk id of each document row
    places: np.ndarray  # int32, each document row's rank in postings.TIE_ORDER
    num_docs: int
    # term -> (term id, document frequency), of the same state: a rebuilt index numbers
    # its terms anew, so the held postings must never meet another state's term ids.
    terms: dict[str, tuple[int, int]]
    # The full-text index's state they were read from (`state`): a searcher compares it
    # before each use, and asks DuckDB while they are behind.
    state: tuple[int, int]

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, fts: str = FTS_SCHEMA) -> MemoryPostings:
        """Read the postings, documents and statistics of the index's full-text index."""
        n, avgdl = con.execute(f"SELECT num_docs, avgdl FROM {fts}.stats").fetchall()[0]
        docs = con.execute(f"SELECT docid, name, len FROM {fts}.docs ORDER BY docid").fetchnumpy()
        docid = np.asarray(docs["docid"], dtype=np.int64)
        chunk_ids = np.asarray(docs["name"], dtype=np.int64)
        length = np.asarray(docs["len"], dtype=np.float64)
        rows = con.execute(
            f"SELECT termid, docid, tf FROM {fts}.{postings.TABLE} ORDER BY termid, docid"
        ).fetchnumpy()
        termid = np.asarray(rows["termid"], dtype=np.int64)
        row = np.searchsorted(docid, np.asarray(rows["docid"], dtype=np.int64))
        tf = np.asarray(rows["tf"], dtype=np.float64)
        k1, b = postings.K1, postings.B
        norm = (1 - b) + b * (length[row] / float(avgdl)) if len(row) else np.zeros(0)
        weights = (tf * (k1 + 1)) / (tf + k1 * norm)
        top = int(termid.max()) + 1 if len(termid) else 0
        starts = np.searchsorted(termid, np.arange(top + 1), side="left").astype(np.int64)
        vocabulary = {
            str(term): (int(t), int(df))
            for term, t, df in con.execute(f"SELECT term, termid, df FROM {fts}.dict").fetchall()
        }
        return cls(
            starts,
            row.astype(np.int32),
            weights,
            chunk_ids,
            _places(con, chunk_ids),
            int(n),
            vocabulary,
            state(con, fts),
        )

    @property
    def nbytes(self) -> int:
        """What the arrays hold (the vocabulary not counted)."""
        arrays = (self.starts, self.docs, self.weights, self.chunk_ids, self.places)
        return sum(a.nbytes for a in arrays)

    def top(self, words: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """The `limit` best (chunk id, score), best first, as `postings.top` ranks them, for
        the query's distinct terms as the index's tokenizer and stemmer make them
        (`query_terms`)."""
        parts, gains = [], []
        for termid, df in (self.terms[w] for w in set(words) if w in self.terms):
            if termid + 1 >= len(self.starts):
                continue
            lo, hi = self.starts[termid], self.starts[termid + 1]
            if hi <= lo:
                continue
            idf = np.log10(((self.num_docs - df) + 0.5) / (df + 0.5) + 1)  # SQL log: base 10
            parts.append(self.docs[lo:hi])
            gains.append(idf * self.weights[lo:hi])
        if not parts or limit < 1:
            return []
        rows = np.concatenate(parts)
        scores = np.bincount(rows, weights=np.concatenate(gains), minlength=len(self.chunk_ids))
        hit = np.flatnonzero(scores)  # every term's factor is positive
        scored = np.round(scores[hit], postings.SCORE_DECIMALS)  # the hits' alone: 1M docs
        if len(hit) > limit:
            # The limit-th best score, and every hit scoring at least it (ties included).
            cut = np.partition(scored, len(hit) - limit)[len(hit) - limit]
            keep = scored >= cut
            hit, scored = hit[keep], scored[keep]
        order = np.lexsort((self.places[hit], -scored))[:limit]
        best = zip(self.chunk_ids[hit[order]], scored[order], strict=True)
        return [(int(c), float(s)) for c, s in best]


def _places(con: duckdb.DuckDBPyConnection, chunk_ids: np.ndarray) -> np.ndarray:
    """Each document's rank among the chunks in postings.TIE_ORDER."""
    ordered = np.asarray(
        con.execute(f"SELECT id FROM chunks ORDER BY {postings.TIE_ORDER}").fetchnumpy()["id"],
        dtype=np.int64,
    )
    by_id = np.argsort(ordered, kind="stable")
    at = np.minimum(np.searchsorted(ordered[by_id], chunk_ids), max(len(ordered) - 1, 0))
    return by_id[at].astype(np.int32) if len(ordered) else np.zeros(len(chunk_ids), np.int32)


def query_terms(con: duckdb.DuckDBPyConnection, words: str, fts: str = FTS_SCHEMA) -> list[str]:
    """The query's distinct terms, by the index's own tokenizer and stemmer."""
    if not words.strip():
        return []
    rows = con.execute(f"SELECT term FROM {fts}.{postings.TERMS}(?)", [words]).fetchall()
    return [str(term) for (term,) in rows]


def postings_count(con: duckdb.DuckDBPyConnection, fts: str = FTS_SCHEMA) -> int:
    return int(con.execute(f"SELECT count(*) FROM {fts}.{postings.TABLE}").fetchall()[0][0])


def state(con: duckdb.DuckDBPyConnection, fts: str = FTS_SCHEMA) -> tuple[int, int]:
    """(documents, largest chunk id) of the full-text index: every change moves it, since
    a patch or rebuild that adds a document adds a chunk id larger than any before (ids
    are never reused), and one that only removes lowers the count. 0.3 ms at 100k."""
    row = con.execute(f"SELECT count(*), coalesce(max(name), 0) FROM {fts}.docs").fetchall()[0]
    return int(row[0]), int(row[1])
