"""The BM25 full-text index over `chunks.search_text`: built by DuckDB's fts extension,
kept up to date by patching its tables in place.

DuckDB's full-text index is a snapshot of the table it was built from and does not follow
later writes. `update` brings it up to date: a small change is patched into the index's own
tables, a large one rebuilds it. The functions here run inside the store's transactions;
`Store` is their only caller and offers them as methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import duckdb

from gbr.core.store import postings, test_words
from gbr.core.store.handle import StoreHandle
from gbr.core.store.test_words import TestWords

FTS_SCHEMA = "fts_main_chunks"

Update = Literal["rebuilt", "patched", "unchanged"]


@dataclass(frozen=True, slots=True)
class FtsConfig:
    """How DuckDB's full-text index tokenizes `search_text` (chosen on the dev set).

    Porter stays (issue 10, round three): without a stemmer the fused ranking gained on the
    devcorpus dev half (R@5 / MRR@10 0.930 / 0.791 -> 0.947 / 0.817 per repository, 0.857 /
    0.743 -> 0.857 / 0.755 in one index), but lost recall on the held-out half (0.859 /
    0.697 -> 0.816 / 0.707, and 0.811 / 0.652 -> 0.771 / 0.655 in one index): questions say
    `decodes`, `lists`, `colours` where the code says `decode`, `list`, `colour`.
    """

    stemmer: str = "porter"
    stopwords: str = "english"
    # Word characters: underscores and digits stay, so `map_loop` and `isbn13` survive
    # whole next to the split words that search_text adds.
    ignore: str = r"(\.|[^a-z0-9_])+"

    def pragma(self) -> str:
        return (
            "PRAGMA create_fts_index('chunks', 'id', 'search_text', overwrite=1, "
            f"stemmer='{self.stemmer}', stopwords='{self.stopwords}', "
            f"ignore='{self.ignore}', strip_accents=1, lower=1)"
        )


DEFAULT_FTS = FtsConfig()


def lent_signature(lend: TestWords | None) -> str:
    """What the meta records of the words tests lend (gbr.core.store.test_words)."""
    return "off" if lend is None else lend.signature()


def outdated(meta: dict[str, str], config: FtsConfig, lend: TestWords | None) -> bool:
    """Whether the index was built with other tokenizer settings or other lent words."""
    return meta.get("fulltext_config") != config.pragma() or meta.get(
        "fulltext_test_words", "off"
    ) != lent_signature(lend)


def refresh(store: StoreHandle, config: FtsConfig, lend: TestWords | None = None) -> None:
    """Rebuild the full-text index from the chunks, in one transaction, with the words
    tests lend as `lend` says (none when None).

    The old index is dropped object by object, then rebuilt: other connections keep
    searching the old one until the commit. `overwrite=1` would drop it with one `DROP
    SCHEMA ... CASCADE`, and with duckdb 1.5.5 a WAL holding that drop (a kill after a
    rebuild, before the checkpoint, in a process that had built the index before) fails to
    replay: "Cannot drop entry fts_main_chunks because there are entries that depend on
    it", and the file no longer opens.
    """
    con = store.con
    with store.transaction():
        test_words.apply(con, lend)
        tables = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
            [FTS_SCHEMA],
        ).fetchall()
        macros = con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() "
            "WHERE schema_name = ? AND function_type IN ('macro', 'table_macro')",
            [FTS_SCHEMA],
        ).fetchall()
        for (name,) in macros:
            con.execute(f'DROP MACRO IF EXISTS {FTS_SCHEMA}."{name}"')
        for (name,) in tables:
            con.execute(f'DROP TABLE IF EXISTS {FTS_SCHEMA}."{name}"')
        con.execute(f"DROP SCHEMA IF EXISTS {FTS_SCHEMA}")
        con.execute(config.pragma())
        postings.build(con, FTS_SCHEMA, config.stemmer)
        clear_stale(con)
        store.set_meta(fulltext_config=config.pragma(), fulltext_test_words=lent_signature(lend))


def update(
    store: StoreHandle, config: FtsConfig, rebuild_share: float, lend: TestWords | None = None
) -> Update:
    """Bring the full-text index up to date with the chunks; returns how it was done.

    A daemon's batch changes a few chunks, and a full rebuild costs about 0.8 s per 10k
    chunks, which is most of a save's time to become searchable. So the index tables are
    patched instead: the documents whose chunk is gone, and the chunks it lacks, are
    found by comparing the two (ids are never reused), so no bookkeeping can drift and a
    run killed half-way is repaired by the next one. Tokens go through the index's own
    `tokenize` macro, its stop word table and `stem`, as the extension builds them;
    tests compare the result with a rebuild. A large change, an index built with other
    settings, or none at all is rebuilt.

    The words tests lend (`lend`, gbr.core.store.test_words) are brought up to date first,
    in the same transaction: a chunk whose lent words changed keeps its id, so it is
    patched as a document gone and a document new.
    """
    con = store.con
    if (
        not exists(con)
        or outdated(store.meta(), config, lend)
        or not postings.present(con, FTS_SCHEMA)  # built by an older gbr
    ):
        refresh(store, config, lend)
        return "rebuilt"
    fts = FTS_SCHEMA
    with store.transaction():
        # Lent words change only with the chunks (a write gives every chunk a new id), so
        # an index whose chunks did not change skips working them out.
        changed = lend is not None and _chunks_changed(con)
        retext = test_words.apply(con, lend) if changed else []
        con.execute("CREATE OR REPLACE TEMP TABLE fts_retext(id BIGINT)")
        if retext:
            con.executemany("INSERT INTO fts_retext VALUES (?)", [(i,) for i in retext])
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE fts_gone AS SELECT docid FROM {fts}.docs "
            "WHERE name NOT IN (SELECT id FROM chunks) OR name IN (SELECT id FROM fts_retext)"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE fts_new AS SELECT id, search_text FROM chunks "
            f"WHERE id NOT IN (SELECT name FROM {fts}.docs) "
            "OR id IN (SELECT id FROM fts_retext)"
        )
        gone, new, docs = con.execute(
            "SELECT (SELECT count(*) FROM fts_gone), (SELECT count(*) FROM fts_new), "
            f"(SELECT count(*) FROM {fts}.docs)"
        ).fetchone() or (0, 0, 0)
        if gone + new == 0:
            clear_stale(con)
            return "unchanged"
        rebuild = gone + new > rebuild_share * max(docs, 1)
        if not rebuild:
            _patch(con, config)
            clear_stale(con)
    if rebuild:
        refresh(store, config, lend)
        return "rebuilt"
    return "patched"


def _chunks_changed(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a chunk is gone from, or missing in, the full-text index."""
    fts = FTS_SCHEMA
    row = con.execute(
        f"""SELECT EXISTS (SELECT 1 FROM {fts}.docs WHERE name NOT IN (SELECT id FROM chunks))
        OR EXISTS (SELECT 1 FROM chunks WHERE id NOT IN (SELECT name FROM {fts}.docs))"""
    ).fetchone()
    return bool(row and row[0])


def _patch(con: duckdb.DuckDBPyConnection, config: FtsConfig) -> None:
    """Remove the gone documents and add the new ones (see `update`), in the caller's
    transaction: readers on other connections see the old index until the commit."""
    fts = FTS_SCHEMA
    stem = "w" if config.stemmer == "none" else f"stem(w, '{config.stemmer}')"
    stop = "" if config.stopwords == "none" else f"AND w NOT IN (SELECT sw FROM {fts}.stopwords)"
    run = con.execute
    # Document frequencies first, while the gone documents' terms are still there.
    run(
        f"""UPDATE {fts}.dict SET df = dict.df - gone.n
        FROM (SELECT termid, count(DISTINCT docid) AS n FROM {fts}.terms
              WHERE docid IN (SELECT docid FROM fts_gone) GROUP BY termid) AS gone
        WHERE dict.termid = gone.termid"""
    )
    run(f"DELETE FROM {fts}.terms WHERE docid IN (SELECT docid FROM fts_gone)")
    run(f"DELETE FROM {fts}.docs WHERE docid IN (SELECT docid FROM fts_gone)")
    run(f"DELETE FROM {fts}.dict WHERE df <= 0")
    run(
        f"""CREATE OR REPLACE TEMP TABLE fts_new_terms AS
        WITH numbered AS (
            SELECT id, search_text,
                   (SELECT coalesce(max(docid), -1) FROM {fts}.docs)
                       + row_number() OVER (ORDER BY id) AS docid
            FROM fts_new),
        words AS (
            SELECT docid, id, unnest({fts}.tokenize(search_text)) AS w FROM numbered)
        SELECT docid, id, {stem} AS term FROM words WHERE w <> '' {stop}"""
    )
    run(
        f"""INSERT INTO {fts}.docs
        SELECT n.docid, n.id, coalesce(t.len, 0)
        FROM (SELECT DISTINCT docid, id FROM fts_new_terms) AS n
        LEFT JOIN (SELECT docid, count(*) AS len FROM fts_new_terms GROUP BY docid) AS t
        USING (docid)"""
    )
    run(
        f"""INSERT INTO {fts}.dict
        SELECT (SELECT coalesce(max(termid), -1) FROM {fts}.dict)
                   + row_number() OVER (ORDER BY term), term, 0
        FROM (SELECT DISTINCT term FROM fts_new_terms
              WHERE term NOT IN (SELECT term FROM {fts}.dict))"""
    )
    run(
        f"""UPDATE {fts}.dict SET df = dict.df + added.n
        FROM (SELECT term, count(DISTINCT docid) AS n FROM fts_new_terms GROUP BY term)
             AS added
        WHERE dict.term = added.term"""
    )
    run(
        f"""INSERT INTO {fts}.terms
        SELECT t.docid, 0, d.termid FROM fts_new_terms AS t JOIN {fts}.dict AS d USING (term)"""
    )
    run(
        f"""UPDATE {fts}.stats SET num_docs = s.n, avgdl = s.avgdl
        FROM (SELECT count(*) AS n, avg(len) AS avgdl FROM {fts}.docs) AS s"""
    )
    postings.patch(con, fts, "fts_gone", "fts_new_terms")
    for table in ("fts_gone", "fts_new", "fts_new_terms", "fts_retext"):
        run(f"DROP TABLE IF EXISTS {table}")


def exists(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute(
        "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?",
        [FTS_SCHEMA],
    ).fetchall()[0]
    return bool(row and row[0])


def mark_stale(store: StoreHandle) -> None:
    """Remember, durably, that chunks changed after the last full-text rebuild.

    A run killed between its writes and its rebuild leaves those files unchanged by
    hash, so the next run would write nothing and skip the rebuild; this flag makes it
    rebuild anyway, so the new chunks become findable by BM25.
    """
    store.set_meta(fulltext_stale="1")


def clear_stale(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("DELETE FROM meta WHERE key = 'fulltext_stale'")
