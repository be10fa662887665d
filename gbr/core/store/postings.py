"""BM25 that reads only the documents holding a query term.

DuckDB's `match_bm25` macro is a per-document function: `SELECT match_bm25(id, q) FROM
chunks` runs its term lookups for every row, so a query costs time in proportion to the whole
index (about 60 ms at 100k chunks here) even when its terms occur in a few hundred chunks.
The full-text index already holds the postings (`terms`: one row per token occurrence), but
in document order, so finding a term's documents means scanning them all.

So a postings table sits beside the extension's tables: one row per (term, document) with its
term frequency, sorted by term id. DuckDB keeps min/max statistics per row group, so a lookup
of a few term ids reads only the row groups that hold them. Scores are computed with the same
formula, the same tokenizer, stemmer and statistics as the extension's macro (k1 = 1.2,
b = 0.75, its defaults), so the ranking is the same; tests compare the two.

Documents added by an incremental patch are appended unsorted at the end: they are few, and
the next rebuild sorts everything again.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

TABLE = "postings"
TERMS = "query_terms"
K1 = 1.2
B = 0.75
# Scores are compared rounded to this many decimals, then ties go by TIE_ORDER. The sum over
# a document's terms runs in whatever order DuckDB's threads (or numpy) take them, so equal
# documents (a file copied, a function repeated) scored a few ulps apart, and their order
# changed from run to run, and between DuckDB and the postings held in memory. Ties by
# chunk id alone changed at every rebuild, which numbers the chunks in the order files
# are written; a chunk's place in the tree does not.
SCORE_DECIMALS = 9
TIE_ORDER = "path, start_line, part, kind, name, id"


def build(con: duckdb.DuckDBPyConnection, fts: str, stemmer: str) -> None:
    """(Re)create the postings table from the extension's `terms` table, and the macro that
    turns a query into its terms with the index's own tokenizer and stemmer (baked in, as
    the extension bakes them into `match_bm25`, so a search reads no settings)."""
    stem = "w" if stemmer == "none" else f"stem(w, '{stemmer}')"
    con.execute(
        f"""CREATE OR REPLACE MACRO {fts}.{TERMS}(q) AS TABLE
        SELECT DISTINCT {stem} AS term FROM (SELECT unnest({fts}.tokenize(q)) AS w)"""
    )
    con.execute(f"DROP TABLE IF EXISTS {fts}.{TABLE}")
    con.execute(
        f"""CREATE TABLE {fts}.{TABLE} AS
        SELECT termid, docid, count(*)::INTEGER AS tf FROM {fts}.terms
        GROUP BY termid, docid ORDER BY termid, docid"""
    )


def patch(con: duckdb.DuckDBPyConnection, fts: str, gone: str, new_terms: str) -> None:
    """Drop the postings of the documents in table `gone` (docid) and add those of
    `new_terms` (docid, term), in the caller's transaction, after `dict` is up to date."""
    con.execute(f"DELETE FROM {fts}.{TABLE} WHERE docid IN (SELECT docid FROM {gone})")
    con.execute(
        f"""INSERT INTO {fts}.{TABLE}
        SELECT d.termid, t.docid, count(*)::INTEGER FROM {new_terms} AS t
        JOIN {fts}.dict AS d USING (term) GROUP BY d.termid, t.docid ORDER BY 1, 2"""
    )


def present(con: duckdb.DuckDBPyConnection, fts: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
        [fts, TABLE],
    ).fetchone()
    return bool(row and row[0])


def top(
    con: duckdb.DuckDBPyConnection,
    fts: str,
    words: str,
    limit: int,
    where: str = "true",
    params: Sequence[object] = (),
) -> list[tuple[int, float]]:
    """The `limit` best (chunk id, BM25 score) among chunks satisfying `where` (SQL over
    chunks), best first, as `match_bm25` would rank them; scores rounded to SCORE_DECIMALS,
    ties in TIE_ORDER. Raises DuckDB's CatalogException on an index built before the
    postings table existed."""
    # A semi-join, so that the filter's column names (`name`, `path`) mean the chunk's.
    filtered = (
        "" if where.strip() == "true" else f"WHERE d.name IN (SELECT id FROM chunks WHERE {where})"
    )
    rows = con.execute(
        f"""WITH q AS (SELECT dict.termid, dict.df FROM {fts}.dict AS dict
              WHERE dict.term IN (SELECT term FROM {fts}.{TERMS}(?))),
        st AS (SELECT num_docs AS n, avgdl FROM {fts}.stats),
        scored AS (
            SELECT p.docid, sum(
                log(((st.n - q.df) + 0.5) / (q.df + 0.5) + 1)
                * ((p.tf * ({K1} + 1))
                   / (p.tf + {K1} * ((1 - {B}) + {B} * (d.len / st.avgdl))))) AS score
            FROM {fts}.{TABLE} AS p JOIN q USING (termid)
            JOIN {fts}.docs AS d ON d.docid = p.docid, st
            GROUP BY p.docid),
        ranked AS MATERIALIZED (
            SELECT d.name AS id, round(s.score, {SCORE_DECIMALS}) AS score
            FROM scored AS s JOIN {fts}.docs AS d USING (docid) {filtered}),
        cut AS (SELECT min(score) AS low FROM (
            SELECT score FROM ranked ORDER BY score DESC LIMIT ?))
        SELECT r.id, r.score FROM ranked AS r JOIN cut ON r.score >= cut.low
        ORDER BY r.score DESC, r.id""",
        [words, *params, limit],
    ).fetchall()
    return ties_in_place(con, [(int(i), float(s)) for i, s in rows])[:limit]


def ties_in_place(
    con: duckdb.DuckDBPyConnection, ranked: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """`ranked` (best first, every hit tied with the last one included) with each run of
    equal scores in TIE_ORDER. Only tied hits are looked up: reading the chunks' paths
    for every hit cost a third of the query at 100k chunks, and real code ties seldom."""
    tied = {
        doc
        for at, (doc, score) in enumerate(ranked)
        if (at and ranked[at - 1][1] == score)
        or (at + 1 < len(ranked) and ranked[at + 1][1] == score)
    }
    if not tied:
        return ranked
    # A list of literals, which DuckDB filters in the scan (a parameter list is joined,
    # reading every chunk's path); they are ids DuckDB returned, as ints.
    listed = ", ".join(str(int(doc)) for doc in sorted(tied))
    query = f"SELECT id FROM chunks WHERE id IN ({listed}) ORDER BY {TIE_ORDER}"
    rows = con.execute(query).fetchall()
    place = {int(doc): at for at, (doc,) in enumerate(rows)}
    return sorted(ranked, key=lambda hit: (-hit[1], place.get(hit[0], -1)))
