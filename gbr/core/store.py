"""The index: one DuckDB file holding files, chunks, vectors and a BM25 full-text index.

One writer owns a Store; replacing a file's chunks is one transaction, so a crash leaves
either the old or the new version of the file, never half of each.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from gbr.core.chunk_text import DEFAULT_EMBED_FORMAT
from gbr.core.errors import IndexCorruptError, StoreError, StoreWriteError
from gbr.core.graph import store as graph_tables
from gbr.core.graph.model import FileGraph
from gbr.core.records import Chunk, FileProblem, SourceFile

SCHEMA_VERSION = "1"
_FTS_SCHEMA = "fts_main_chunks"


@dataclass(frozen=True, slots=True)
class FtsConfig:
    """How DuckDB's full-text index tokenizes `search_text` (chosen on the dev set)."""

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


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk plus the derived texts and vector, as the Writer hands it to the store."""

    chunk: Chunk
    search_text: str
    tokens: int
    embed_hash: str
    vector: np.ndarray


@dataclass(frozen=True, slots=True)
class FileState:
    content_hash: str
    status: str  # ok | failed | partial
    error: str = ""  # why, for a failed or partial file


def _set_up(con: duckdb.DuckDBPyConnection) -> None:
    """Every connection: the fts extension, and no progress bar. DuckDB draws its bar on
    file descriptor 1 for a slow statement even when stdout is a pipe, and for
    `gleambrctl mcp` stdout is the protocol channel."""
    con.execute(f"LOAD '{_extension_path('fts')}'")
    con.execute("SET enable_progress_bar = false")


def _extension_path(name: str) -> Path:
    spec = find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(
            f"the DuckDB {name} extension package is missing; run `make install` "
            f"(pip install duckdb-extension-{name}=={duckdb.__version__})"
        )
    base = Path(next(iter(spec.submodule_search_locations)))
    path = base / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise StoreError(
            f"no {name} extension for duckdb {duckdb.__version__} at {path}; "
            f"install duckdb-extension-{name}=={duckdb.__version__}"
        )
    return path


class Store:
    """Access to one index file. Not thread-safe: use `cursor()` for another thread."""

    # Called before each commit; a crash drill (GBR_FAULTS=commit@N) fails commits from here.
    before_commit: Callable[[], None] | None = None

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Store:
        path = Path(path)
        refuse_odd_file(path)
        if read_only and not path.is_file():
            raise StoreError(f"no index at {path}; run `gleambrctl index` first")
        if not read_only:
            prepare_folder(path)
        try:
            con = duckdb.connect(str(path), read_only=read_only)
        except (duckdb.Error, OSError) as exc:
            raise damaged(exc, path) or StoreError(
                f"cannot open index {path}: {_one_line(exc)}"
            ) from exc
        try:
            _set_up(con)
        except duckdb.Error as exc:
            con.close()
            raise StoreError(f"cannot load the DuckDB fts extension: {_one_line(exc)}") from exc
        store = cls(con, path, read_only)
        if not read_only:
            try:
                store._create_meta()
            except duckdb.Error as exc:
                con.close()
                bad = damaged(exc, path)
                if bad is None:
                    raise
                raise bad from exc
        return store

    def verify(self) -> None:
        """Read every block of every table, so a damaged file is found now, not mid-query.

        DuckDB checks a block's checksum only when it reads the block, and a search reads
        few of them: garbage in the middle of the file broke searches while `index` found
        nothing wrong. Hashing every row of every table reads them all (about 0.6 s for
        50k chunks with their vectors, measured on 2 loaded cores).
        """
        try:
            tables = self.con.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() "
                "WHERE database_name = current_database()"
            ).fetchall()
            for schema, table in tables:
                self.con.execute(
                    f'SELECT bit_xor(hash(t)) FROM "{schema}"."{table}" AS t'
                ).fetchall()
        except duckdb.Error as exc:
            bad = damaged(exc, self.path)
            if bad is None:
                raise StoreError(f"cannot read index {self.path}: {_one_line(exc)}") from exc
            raise bad from exc

    def cursor(self) -> Store:
        """A second connection to the same database, for use from another thread."""
        cur = self.con.cursor()
        _set_up(cur)
        return Store(cur, self.path, self.read_only)

    def close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema

    def _create_meta(self) -> None:
        self.con.execute("CREATE TABLE IF NOT EXISTS meta(key VARCHAR, value VARCHAR)")

    def meta(self) -> dict[str, str]:
        try:
            rows = self.con.execute("SELECT key, value FROM meta").fetchall()
        except duckdb.CatalogException:
            return {}
        return dict(rows)

    def set_meta(self, **values: str) -> None:
        with _writing(self.path):
            for key, value in values.items():
                self.con.execute("DELETE FROM meta WHERE key = ?", [key])
                self.con.execute("INSERT INTO meta VALUES (?, ?)", [key, value])

    def prepare(
        self,
        *,
        model_id: str,
        chunker_version: str,
        dim: int,
        embed_format: str = DEFAULT_EMBED_FORMAT,
    ) -> str | None:
        """Make the tables ready for this model and chunker; wipe them if either changed.

        Returns why everything is re-indexed, or None when the existing index is reusable.
        """
        want = {
            "schema_version": SCHEMA_VERSION,
            "model_id": model_id,
            "chunker_version": chunker_version,
            "dim": str(dim),
            "embed_format": embed_format,
        }
        have = self.meta()
        reason = None
        if have.get("schema_version"):
            changed = [k for k, v in want.items() if have.get(k) != v]
            if changed:
                reason = "; ".join(
                    f"{k.replace('_', ' ')} changed from {have.get(k)} to {want[k]}"
                    for k in changed
                )
        with self.transaction():
            if reason:
                self.con.execute("DROP TABLE IF EXISTS chunks")
                self.con.execute("DROP TABLE IF EXISTS files")
                self.mark_fulltext_stale()  # its documents are gone with the chunks
            self._create_tables(dim)
            self.set_meta(**want, **graph_tables.prepare(self.con, have, wiped=bool(reason)))
        return reason

    def _create_tables(self, dim: int) -> None:
        self.con.execute("CREATE SEQUENCE IF NOT EXISTS chunk_ids")
        self.con.execute(
            """CREATE TABLE IF NOT EXISTS files(
                path VARCHAR, module VARCHAR, package VARCHAR, content_hash VARCHAR,
                size BIGINT, mtime DOUBLE, status VARCHAR, error_kind VARCHAR,
                error VARCHAR, indexed_at DOUBLE)"""
        )
        self.con.execute(
            f"""CREATE TABLE IF NOT EXISTS chunks(
                id BIGINT, path VARCHAR, module VARCHAR, package VARCHAR, kind VARCHAR,
                name VARCHAR, signature VARCHAR, visibility VARCHAR, start_line INTEGER,
                end_line INTEGER, part INTEGER, parts INTEGER, doc VARCHAR, text VARCHAR,
                header VARCHAR, search_text VARCHAR, tokens INTEGER, embed_hash VARCHAR,
                stale BOOLEAN, embedding FLOAT[{dim}])"""
        )

    # ---------------------------------------------------------------- writing

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    def replace_file(
        self,
        source: SourceFile,
        chunks: Sequence[StoredChunk],
        partial: FileProblem | None = None,
        graph: FileGraph | None = None,
    ) -> int:
        """Swap a file's chunks for new ones in one transaction.

        A `partial` file (some definitions did not parse) whose last good version is in the
        index keeps that whole version, flagged stale, until it parses again: someone typing
        gets search results that agree with each other and with one version of the file,
        rather than a mix of old and new line numbers. Without a good version, the intact
        definitions are stored. Returns how many earlier chunks were kept as stale.
        The file's code graph rows (`graph`) are swapped in the same transaction.
        """
        if partial is not None and self._has_good_version(source.path):
            return self.mark_failed(partial, source, status="partial")
        table = _chunks_table(chunks)
        status, kind, error = (
            ("partial", partial.kind, partial.reason) if partial else ("ok", None, None)
        )
        with self.transaction():
            self.con.execute("DELETE FROM chunks WHERE path = ?", [source.path])
            self.con.execute("DELETE FROM files WHERE path = ?", [source.path])
            graph_tables.replace(self.con, source.path, graph)
            if table.num_rows:
                self.con.register("new_chunks", table)
                try:
                    self.con.execute(
                        "INSERT INTO chunks SELECT nextval('chunk_ids'), * FROM new_chunks"
                    )
                finally:
                    self.con.unregister("new_chunks")
            self.con.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    source.path,
                    source.module,
                    source.package,
                    source.content_hash,
                    source.size,
                    source.mtime,
                    status,
                    kind,
                    error,
                    time.time(),
                ],
            )
        return 0

    def _has_good_version(self, path: str) -> bool:
        """Whether the file's chunks come from a version that parsed: it is `ok`, or all
        its chunks are stale ones kept from such a version while it was broken."""
        row = self.con.execute(
            "SELECT f.status, count(c.path), count(c.path) FILTER (c.stale) "
            "FROM files f LEFT JOIN chunks c ON c.path = f.path WHERE f.path = ? "
            "GROUP BY f.status",
            [path],
        ).fetchall()
        if not row:
            return False
        status, chunks, stale = row[0]
        return chunks > 0 and (status == "ok" or chunks == stale)

    def mark_failed(
        self, problem: FileProblem, source: SourceFile | None, status: str = "failed"
    ) -> int:
        """Record why a file was dropped (or is partial); its earlier chunks stay, stale.

        Returns how many chunks were kept as stale. A name that is not valid UTF-8 (its
        bytes kept as surrogates) is stored with `\xff` escapes: DuckDB takes only UTF-8,
        and the reason must still reach `status`.
        """
        path = storable_text(problem.path)
        with self.transaction():
            kept = self.con.execute(
                "SELECT count(*) FROM chunks WHERE path = ?", [path]
            ).fetchall()[0]
            self.con.execute("UPDATE chunks SET stale = true WHERE path = ?", [path])
            self.con.execute("DELETE FROM files WHERE path = ?", [path])
            self.con.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    path,
                    storable_text(source.module) if source else None,
                    source.package if source else None,
                    source.content_hash if source else None,
                    source.size if source else None,
                    source.mtime if source else None,
                    status,
                    problem.kind,
                    storable_text(problem.reason),
                    time.time(),
                ],
            )
        return int(kept[0]) if kept else 0

    def remove_files(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with self.transaction():
            for path in paths:
                self.con.execute("DELETE FROM chunks WHERE path = ?", [path])
                self.con.execute("DELETE FROM files WHERE path = ?", [path])
                graph_tables.remove(self.con, path)
        return len(paths)

    def refresh_fulltext(self, config: FtsConfig = FtsConfig()) -> None:
        """DuckDB's full-text index is a snapshot; rebuild it after a batch of writes.

        The old index is dropped object by object, then rebuilt, in one transaction: other
        connections keep searching the old one until the commit. `overwrite=1` would drop
        it with one `DROP SCHEMA ... CASCADE`, and with duckdb 1.5.5 a WAL holding that drop
        (a kill after a rebuild, before the checkpoint, in a process that had built the
        index before) fails to replay: "Cannot drop entry fts_main_chunks because there
        are entries that depend on it", and the file no longer opens.
        """
        with self.transaction():
            tables = self.con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                [_FTS_SCHEMA],
            ).fetchall()
            macros = self.con.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE schema_name = ? AND function_type = 'macro'",
                [_FTS_SCHEMA],
            ).fetchall()
            for (name,) in macros:
                self.con.execute(f'DROP MACRO IF EXISTS {_FTS_SCHEMA}."{name}"')
            for (name,) in tables:
                self.con.execute(f'DROP TABLE IF EXISTS {_FTS_SCHEMA}."{name}"')
            self.con.execute(f"DROP SCHEMA IF EXISTS {_FTS_SCHEMA}")
            self.con.execute(config.pragma())
            self._clear_fulltext_stale()
            self.set_meta(fulltext_config=config.pragma())

    def update_fulltext(self, config: FtsConfig = FtsConfig(), rebuild_share: float = 0.25) -> str:
        """Bring the full-text index up to date with the chunks; returns how it was done.

        A daemon's batch changes a few chunks, and a full rebuild costs about 0.8 s per 10k
        chunks, which is most of a save's time to become searchable. So the index tables are
        patched instead: the documents whose chunk is gone, and the chunks it lacks, are
        found by comparing the two (ids are never reused), so no bookkeeping can drift and a
        run killed half-way is repaired by the next one. Tokens go through the index's own
        `tokenize` macro, its stop word table and `stem`, as the extension builds them;
        tests compare the result with a rebuild. A large change, an index built with other
        settings, or none at all is rebuilt: "rebuilt", "patched" or "unchanged".
        """
        if not self.has_fulltext() or self.meta().get("fulltext_config") != config.pragma():
            self.refresh_fulltext(config)
            return "rebuilt"
        fts = _FTS_SCHEMA
        with self.transaction():
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE fts_gone AS SELECT docid FROM {fts}.docs "
                "WHERE name NOT IN (SELECT id FROM chunks)"
            )
            self.con.execute(
                "CREATE OR REPLACE TEMP TABLE fts_new AS SELECT id, search_text FROM chunks "
                f"WHERE id NOT IN (SELECT name FROM {fts}.docs)"
            )
            gone, new, docs = self.con.execute(
                "SELECT (SELECT count(*) FROM fts_gone), (SELECT count(*) FROM fts_new), "
                f"(SELECT count(*) FROM {fts}.docs)"
            ).fetchone() or (0, 0, 0)
            if gone + new == 0:
                self._clear_fulltext_stale()
                return "unchanged"
            if gone + new > rebuild_share * max(docs, 1):
                rebuild = True
            else:
                rebuild = False
                self._patch_fulltext(config)
                self._clear_fulltext_stale()
        if rebuild:
            self.refresh_fulltext(config)
            return "rebuilt"
        return "patched"

    def _patch_fulltext(self, config: FtsConfig) -> None:
        """Remove the gone documents and add the new ones (see update_fulltext), in the
        caller's transaction: readers on other connections see the old index until commit."""
        fts = _FTS_SCHEMA
        stem = "w" if config.stemmer == "none" else f"stem(w, '{config.stemmer}')"
        stop = (
            "" if config.stopwords == "none" else f"AND w NOT IN (SELECT sw FROM {fts}.stopwords)"
        )
        run = self.con.execute
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
        for table in ("fts_gone", "fts_new", "fts_new_terms"):
            run(f"DROP TABLE IF EXISTS {table}")

    def has_fulltext(self) -> bool:
        row = self.con.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?",
            [_FTS_SCHEMA],
        ).fetchall()[0]
        return bool(row and row[0])

    def mark_fulltext_stale(self) -> None:
        """Remember, durably, that chunks changed after the last full-text rebuild.

        A run killed between its writes and its rebuild leaves those files unchanged by
        hash, so the next run would write nothing and skip the rebuild; this flag makes it
        rebuild anyway, so the new chunks become findable by BM25.
        """
        self.set_meta(fulltext_stale="1")

    def _clear_fulltext_stale(self) -> None:
        self.con.execute("DELETE FROM meta WHERE key = 'fulltext_stale'")

    def fulltext_stale(self) -> bool:
        return self.meta().get("fulltext_stale") == "1"

    def checkpoint(self, wait: float = 0.0) -> bool:
        """Fold the WAL into the file; False when other connections stayed busy for `wait` s.

        A daemon searches while it writes, and DuckDB refuses a CHECKPOINT while any other
        transaction runs. `FORCE CHECKPOINT` would wait for them instead, but a connection
        idle on an unread result holds its transaction forever, so waiting can deadlock.
        A skipped checkpoint loses nothing: the WAL is durable, and it is folded in by the
        next checkpoint that finds the database quiet, or when the last connection closes.
        """
        deadline = time.monotonic() + wait
        while True:
            try:
                with _writing(self.path):
                    self.con.execute("CHECKPOINT")
                return True
            except duckdb.TransactionException:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)  # a search takes milliseconds; try again when it is done

    # ---------------------------------------------------------------- reading

    def file_states(self) -> dict[str, FileState]:
        if not self._has_table("files"):
            return {}
        rows = self.con.execute("SELECT path, content_hash, status, error FROM files").fetchall()
        return {p: FileState(h or "", s, e or "") for p, h, s, e in rows}

    def cached_vectors(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already stored for these embedded texts, so they need no model run."""
        if not hashes or not self._has_table("chunks"):
            return {}
        table = self.con.execute(
            "SELECT DISTINCT ON (embed_hash) embed_hash, embedding FROM chunks "
            "WHERE embed_hash IN (SELECT unnest(?))",
            [list(hashes)],
        ).to_arrow_table()
        if table.num_rows == 0:
            return {}
        matrix = _vectors(table.column("embedding"))
        keys = table.column("embed_hash").to_pylist()
        return {k: matrix[i] for i, k in enumerate(keys)}

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, unit vectors) of every chunk, for brute-force cosine in NumPy."""
        if not self._has_table("chunks"):  # a new index whose first run has not begun
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        table = self.con.execute("SELECT id, embedding FROM chunks ORDER BY id").to_arrow_table()
        ids = table.column("id").to_numpy()
        if table.num_rows == 0:
            return ids, np.zeros((0, 0), dtype=np.float32)
        return ids, _vectors(table.column("embedding"))

    def bm25(
        self, query: str, limit: int, where: str = "true", params: Sequence[object] = ()
    ) -> list[tuple[int, float]]:
        """Best BM25 matches among the chunks that satisfy `where` (SQL over chunks)."""
        if not query.strip():
            return []
        try:
            rows = self.con.execute(
                "SELECT id, score FROM (SELECT id, fts_main_chunks.match_bm25(id, ?) AS score "
                f"FROM chunks WHERE {where}) WHERE score IS NOT NULL "
                "ORDER BY score DESC, id LIMIT ?",
                [query, *params, limit],
            ).fetchall()
        except duckdb.CatalogException as exc:
            raise StoreError(
                "the full-text index is missing; run `gleambrctl index` to rebuild it"
            ) from exc
        return [(int(i), float(s)) for i, s in rows]

    def ids_where(self, where: str, params: Sequence[object]) -> list[int]:
        return [
            r[0]
            for r in self.con.execute(
                f"SELECT id FROM chunks WHERE {where}", list(params)
            ).fetchall()
        ]

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        # The ids are written into the SQL, not bound: DuckDB's Python binding tries to
        # import pandas for every bound list, which cost a quarter of a warm search here.
        id_list = ", ".join(str(int(i)) for i in ids)
        cur = self.con.execute(
            "SELECT id, path, module, package, kind, name, signature, visibility, start_line, "
            f"end_line, part, parts, doc, text, header, stale FROM chunks WHERE id IN ({id_list})"
        )
        cols = [d[0] for d in cur.description]
        return {row[0]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}

    def node_parts(self, path: str, kind: str, name: str) -> list[dict[str, Any]]:
        """Every part of a split node, in order; a name is unique per kind within a file."""
        cur = self.con.execute(
            "SELECT start_line, end_line, part, text FROM chunks "
            "WHERE path = ? AND kind = ? AND name = ? ORDER BY part",
            [path, kind, name],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def counts(self) -> dict[str, int]:
        if not self._has_table("files"):
            return {
                "files": 0,
                "files_ok": 0,
                "files_failed": 0,
                "files_partial": 0,
                "chunks": 0,
                "stale_chunks": 0,
            }
        files_ok, files_failed, files_partial = self.con.execute(
            "SELECT count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'failed'), "
            "count(*) FILTER (status = 'partial') FROM files"
        ).fetchall()[0]
        chunks, stale = self.con.execute(
            "SELECT count(*), count(*) FILTER (stale) FROM chunks"
        ).fetchall()[0]
        return {
            "files": int(files_ok) + int(files_failed) + int(files_partial),
            "files_ok": int(files_ok),
            "files_failed": int(files_failed),
            "files_partial": int(files_partial),
            "chunks": int(chunks),
            "stale_chunks": int(stale),
        }

    def failed_files(self, status: str = "failed") -> list[dict[str, Any]]:
        """Files of a status (`failed`, or `partial`), with their chunks and stale ones."""
        if not self._has_table("files"):
            return []
        cur = self.con.execute(
            "SELECT f.path, f.error_kind, f.error, "
            "(SELECT count(*) FILTER (c.stale) FROM chunks c WHERE c.path = f.path) "
            "AS stale_chunks, "
            "(SELECT count(*) FROM chunks c WHERE c.path = f.path) AS chunks "
            "FROM files f WHERE status = ? ORDER BY path",
            [status],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def last_run(self) -> dict[str, Any] | None:
        raw = self.meta().get("last_run")
        return json.loads(raw) if raw else None

    def _has_table(self, name: str) -> bool:
        row = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
        ).fetchall()[0]
        return bool(row and row[0])


class ThreadLocalStore(Store):
    """One Store shared by many threads: each thread gets its own cursor on first use.

    A DuckDB connection must not run queries from two threads at once, while cursors of
    one connection are independent and cheap. The daemon's request threads and its actors
    all search through one of these; a thread pool reuses its threads, so the number of
    cursors stays at the number of threads.
    """

    def __init__(self, base: Store) -> None:  # Store.__init__ is skipped: `con` is per thread
        self.path = base.path
        self.read_only = base.read_only
        self._base = base
        self._local = threading.local()
        self._cursors: list[Store] = []
        self._lock = threading.Lock()

    @property  # type: ignore[override]
    def con(self) -> duckdb.DuckDBPyConnection:
        mine: Store | None = getattr(self._local, "store", None)
        if mine is None:
            mine = self._base.cursor()
            self._local.store = mine
            with self._lock:
                self._cursors.append(mine)
        return mine.con

    def close_cursors(self) -> None:
        """Close every thread's cursor; a thread that queries again gets a new one."""
        with self._lock:
            cursors, self._cursors = self._cursors, []
        for cursor in cursors:
            cursor.close()
        self._local = threading.local()

    def close(self) -> None:
        self.close_cursors()
        self._base.close()


def status_report(store: Store) -> dict[str, Any]:
    """What `gleambrctl status --json` prints, read from an open store."""
    meta = store.meta()
    try:
        size = store.path.stat().st_size
    except OSError:
        size = 0
    return {
        "db": str(store.path),
        "db_bytes": size,
        "root": meta.get("root"),
        "model_id": meta.get("model_id"),
        "chunker_version": meta.get("chunker_version"),
        **store.counts(),
        "dropped": store.failed_files(),
        "partial": store.failed_files("partial"),
        "last_run": store.last_run(),
    }


class _Transaction:
    """BEGIN/COMMIT, with ROLLBACK on any error so a failed write leaves no trace.

    A commit that fails for a cause outside gbr (no permission, disk full, no file
    descriptors) becomes a StoreWriteError naming the cause and the fix. DuckDB has often
    aborted the transaction itself by then, and a ROLLBACK would raise "no transaction is
    active" over the real cause, so the rollback's own failure is ignored.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.con = store.con

    def __enter__(self) -> None:
        with _writing(self.store.path):
            self.con.begin()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self._rollback()
            if _is_write_failure(exc):
                raise write_error(self.store.path, exc) from exc
            return  # the original error goes on
        try:
            if self.store.before_commit is not None:
                self.store.before_commit()
            self.con.commit()
        except (duckdb.Error, OSError) as err:
            self._rollback()
            raise write_error(self.store.path, err) from err

    def _rollback(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.rollback()


def _is_write_failure(exc: BaseException) -> bool:
    """An error that says the disk refused (not a bug in a query): worth one line, not a trace."""
    return isinstance(exc, OSError | duckdb.IOException | duckdb.OutOfMemoryException) or (
        isinstance(exc, duckdb.Error) and _cause_fix(str(exc)) is not None
    )


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Turn a write refused by the disk into a StoreWriteError; other errors pass through."""
    try:
        yield
    except (duckdb.Error, OSError) as exc:
        if _is_write_failure(exc):
            raise write_error(path, exc) from exc
        raise


_FIXES = (
    (
        ("permission denied", "operation not permitted", "read-only file system"),
        "make {folder} writable, or pass --db with a file in a folder you can write",
    ),
    (("no space left", "disk quota"), "free space on the drive that holds {folder}"),
    (
        ("too many open files",),
        "close other programs or raise the open-file limit (ulimit -n), then try again",
    ),
)


def _cause_fix(message: str) -> str | None:
    lowered = message.lower()
    for needles, fix in _FIXES:
        if any(n in lowered for n in needles):
            return fix
    return None


def write_error(path: Path, exc: BaseException) -> StoreWriteError:
    """The one line for a failed write: the cause as the system said it, then the fix."""
    cause = _one_line(exc)
    for prefix in ("TransactionContext Error: ", "Failed to commit: ", "IO Error: "):
        cause = cause.removeprefix(prefix)
    fix = _cause_fix(cause) or "check the disk and the permissions of {folder}, then run again"
    return StoreWriteError(
        f"cannot write the index {path}: {cause}; " + fix.format(folder=path.parent)
    )


def _vectors(column: pa.ChunkedArray) -> np.ndarray:
    flat = column.combine_chunks()
    dim = flat.type.list_size
    return flat.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32)


_TEXT_COLUMNS = ("path", "module", "package", "kind", "name", "signature", "visibility")
_INT_COLUMNS = ("start_line", "end_line", "part", "parts")
_TAIL_TEXT_COLUMNS = ("doc", "text", "header")


def _chunks_table(items: Sequence[StoredChunk]) -> pa.Table:
    """Rows in the column order of the chunks table (after id), for one bulk INSERT."""
    arrays: dict[str, pa.Array] = {}
    for key in _TEXT_COLUMNS:
        arrays[key] = pa.array([getattr(i.chunk, key) for i in items], type=pa.string())
    for key in _INT_COLUMNS:
        arrays[key] = pa.array([getattr(i.chunk, key) for i in items], type=pa.int32())
    for key in _TAIL_TEXT_COLUMNS:
        arrays[key] = pa.array([getattr(i.chunk, key) for i in items], type=pa.string())
    arrays["search_text"] = pa.array([i.search_text for i in items], type=pa.string())
    arrays["tokens"] = pa.array([i.tokens for i in items], type=pa.int32())
    arrays["embed_hash"] = pa.array([i.embed_hash for i in items], type=pa.string())
    arrays["stale"] = pa.array([False] * len(items), type=pa.bool_())
    dim = int(items[0].vector.shape[0]) if items else 1
    flat = (
        np.concatenate([np.asarray(i.vector, dtype=np.float32) for i in items])
        if items
        else np.zeros(0, dtype=np.float32)
    )
    arrays["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
    return pa.table(arrays)


def refuse_odd_file(db: Path) -> None:
    """An index is a regular file: `--db /dev/null` (or a folder, a FIFO) is refused before
    anything is written beside it, copied from it or renamed over it."""
    if db.exists() and not db.is_file():
        raise StoreError(f"{db} is not a regular file; pass --db with the path of an index file")


def prepare_folder(db: Path) -> None:
    """Create the index's folder, or say in one line why it cannot be and what to do."""
    refuse_odd_file(db)
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {db.parent} for the index "
            f"({exc.strerror or _one_line(exc)}); pass --db with a file in a writable folder"
        ) from exc


# DuckDB's words for a file it cannot trust: a block whose checksum fails, a header that
# is not DuckDB's, and a file shorter than its own block list says.
_DAMAGE = (
    (re.compile(r"Corrupt database file.*?(in block at location \d+)"), "checksum mismatch {0}"),
    (re.compile(r"not a valid DuckDB database file"), "not a valid DuckDB database file"),
    (re.compile(r"Could not read enough bytes"), "the file is shorter than it should be"),
)


def damaged(exc: BaseException, path: Path) -> IndexCorruptError | None:
    """The one-line error for a damaged index file, if `exc` (or its cause) says so.

    Locks, permissions and full disks are not damage: they give None, and the file is
    never moved aside for them.
    """
    seen: BaseException | None = exc
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        if isinstance(seen, IndexCorruptError):
            return seen
        text = str(seen)
        for pattern, detail in _DAMAGE:
            found = pattern.search(text)
            if found:
                what = detail.format(*found.groups())
                return IndexCorruptError(
                    f"the index {path} is damaged ({what}); run `{rebuild_command(path)}` "
                    "to recreate it from the source tree (the damaged file is kept aside)",
                    detail=what,
                )
        seen = seen.__cause__ or seen.__context__
    return None


def rebuild_command(db: Path) -> str:
    if db.name == "index.duckdb" and db.parent.name == ".gbr":
        return f"gleambrctl index --rebuild {db.parent.parent}"
    return f"gleambrctl index --rebuild --db {db} PATH"


def check_index(path: Path) -> IndexCorruptError | None:
    """Whether the index file at `path` is damaged; None when it reads well or is absent.

    Only damage counts: a file another process holds, or one that cannot be opened for
    another reason, is left to the run that opens it next (with its own retries).
    """
    if not path.is_file():
        return None
    try:
        with Store.open(path, read_only=True) as store:
            store.verify()
    except IndexCorruptError as exc:
        return exc
    except StoreError:
        return None
    return None


def set_aside(path: Path, label: str = "corrupt") -> Path:
    """Move the index file (and its WAL) to `<name>.<label>-<UTC time>`; returns where."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    try:
        os.replace(path, aside)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            os.replace(wal, aside.with_name(aside.name + ".wal"))
    except OSError as exc:
        raise StoreError(
            f"cannot move {path} aside ({exc.strerror or _one_line(exc)}); "
            "move or delete it yourself, then run `gleambrctl index` again"
        ) from exc
    return aside


def storable_text(text: str) -> str:
    """`text` as valid UTF-8: undecodable bytes (surrogate escapes) become `\xff` escapes.

    A file name that is not UTF-8 reaches Python as surrogates, which neither DuckDB nor a
    JSON encoder takes."""
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def dumps_summary(summary: dict[str, Any]) -> str:
    return json.dumps(summary, sort_keys=True)
