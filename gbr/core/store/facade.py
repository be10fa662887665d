"""The index: one DuckDB file holding files, chunks, vectors and a BM25 full-text index.

One writer owns a Store; replacing a file's chunks is one transaction, so a crash leaves
either the old or the new version of the file, never half of each.

`Store` is the only door to the file. Its neighbours hold the parts of it by concept:
gbr.core.store.queries (what search and status read), gbr.core.store.fulltext (the BM25
index), gbr.core.store.errors (DuckDB's errors turned into ours). Every public method is
`guarded`: no `duckdb.Error` leaves the store.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from gbr.core.errors import ConfigError, IndexCorruptError, StoreError
from gbr.core.parse.chunk_text import DEFAULT_EMBED_FORMAT
from gbr.core.records import (
    NO_FILTER,
    Chunk,
    ChunkRow,
    FileIssue,
    FileProblem,
    FileState,
    IndexCounts,
    NodePart,
    SearchFilter,
    SourceFile,
)
from gbr.core.store import duckdb_imports, fulltext, postings_memory, test_words, vector_file
from gbr.core.store import queries as store_queries
from gbr.core.store import vectors as store_vectors
from gbr.core.store.errors import damaged, guarded, one_line, store_error, writing
from gbr.core.store.files import (
    CONNECT_CONFIG,
    prepare_folder,
    refuse_odd_file,
    set_aside,
    set_up,
    storable_text,
)
from gbr.core.store.fulltext import DEFAULT_FTS, FtsConfig
from gbr.core.store.test_words import TestWords
from gbr.core.store.writes import (
    FileWrite,
    StoredChunk,
    Transaction,
    swap_files,
    vector_array,
)

if TYPE_CHECKING:
    # Only writes touch the code graph: a search does not import its tables (nor the prompt
    # and LLM modules they bring).
    from gbr.core.graph.model import FileGraph
    from gbr.core.store.rows_memory import MemoryRows

__all__ = [
    "SCHEMA_VERSION",
    "FileState",
    "FileWrite",
    "FtsConfig",
    "Store",
    "StoredChunk",
    "ThreadLocalStore",
    "check_index",
    "damaged",
    "prepare_folder",
    "refuse_odd_file",
    "set_aside",
    "status_report",
    "storable_text",
]

duckdb_imports.mark_pandas_absent()

SCHEMA_VERSION = "1"


class Store:
    """Access to one index file. Not thread-safe: use `cursor()` for another thread."""

    # Called before each commit; a crash drill (GBR_FAULTS=commit@N) fails commits from here.
    before_commit: Callable[[], None] | None = None

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
        self._con = con
        self.path = path
        self.read_only = read_only
        self._generation: str | None = None  # this session's, once a commit recorded it

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, for tests and benches that look inside; gbr goes through methods."""
        return self._con

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
            con = duckdb.connect(str(path), read_only=read_only, config=CONNECT_CONFIG)
        except (duckdb.Error, OSError) as exc:
            raise damaged(exc, path) or StoreError(
                f"cannot open index {path}: {one_line(exc)}"
            ) from exc
        try:
            set_up(con)
        except duckdb.Error as exc:
            con.close()
            raise StoreError(f"cannot load the DuckDB fts extension: {one_line(exc)}") from exc
        store = cls(con, path, read_only)
        if not read_only:
            try:
                store._create_meta()
            except duckdb.Error as exc:
                con.close()
                raise store_error(path, exc) from exc
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
                raise StoreError(f"cannot read index {self.path}: {one_line(exc)}") from exc
            raise bad from exc

    @guarded
    def cursor(self) -> Store:
        """A second connection to the same database, for use from another thread."""
        cur = self.con.cursor()
        set_up(cur)
        return Store(cur, self.path, self.read_only)

    def interrupt(self) -> None:
        """Stop the query running on this connection (from another thread): it raises."""
        with contextlib.suppress(duckdb.Error):
            self.con.interrupt()

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

    @guarded
    def meta(self) -> dict[str, str]:
        try:
            rows = self.con.execute("SELECT key, value FROM meta").fetchall()
        except duckdb.CatalogException:
            return {}
        return dict(rows)

    @guarded
    def set_meta(self, /, **values: str) -> None:
        with writing(self.path):
            for key, value in values.items():
                self.con.execute("DELETE FROM meta WHERE key = ?", [key])
                self.con.execute("INSERT INTO meta VALUES (?, ?)", [key, value])

    @guarded
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
                self.con.execute(f"DROP TABLE IF EXISTS {test_words.TABLE}")
                fulltext.mark_stale(self)  # its documents are gone with the chunks
            self._create_tables(dim)
            from gbr.core.graph import store as graph_tables

            self.set_meta(**want, **graph_tables.prepare(self.con, have, wiped=bool(reason)))
            # Renewed here only for new or wiped tables: a run that changes no chunk keeps
            # the generation, so the vector file beside the index stays good (at 1M chunks
            # a stale one cost the next search 19 s and a 1.5 GB rewrite).
            if reason or not have.get(store_vectors.GENERATION_KEY):
                self._generation = self._renew_generation()
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

    def transaction(self) -> Transaction:
        return Transaction(self)

    def _renew_generation(self) -> str:
        """Record, in the transaction under way, that this session changes the chunks.

        Once per writing session (it commits with the session's first change): ids come
        from a sequence, so later changes show in the ids' statistics, while a rebuilt
        file starts its sequence over and only a new generation tells its vectors apart
        from the old file's (gbr.core.store.vector_file).
        """
        if self._generation is not None:
            return self._generation
        generation = secrets.token_hex(8)
        self.con.execute("DELETE FROM meta WHERE key = ?", [store_vectors.GENERATION_KEY])
        self.con.execute(
            "INSERT INTO meta VALUES (?, ?)", [store_vectors.GENERATION_KEY, generation]
        )
        return generation

    @guarded
    def replace_file(
        self,
        source: SourceFile,
        chunks: Sequence[StoredChunk],
        partial: FileProblem | None = None,
        graph: FileGraph | None = None,
    ) -> int:
        """Swap a file's chunks for new ones in one transaction (see `replace_files`)."""
        return self.replace_files([FileWrite(source, chunks, partial, graph)])[0]

    @guarded
    def replace_files(self, writes: Sequence[FileWrite]) -> list[int]:
        """Swap each file's chunks for new ones, all files in one transaction.

        One transaction and one INSERT per table for many files: per file, the statements
        and the commit cost ~17 ms, so a 250-file package spent 4 s writing before it was
        searchable. A `partial` file (some definitions did not parse) whose last good
        version is in the index keeps that whole version, flagged stale, until it parses
        again: someone typing gets search results that agree with each other and with one
        version of the file, rather than a mix of old and new line numbers. Without a good
        version, the intact definitions are stored. Returns, per write, how many earlier
        chunks were kept as stale. A file's code graph rows swap with its chunks.
        """
        kept = [0] * len(writes)
        swap: list[FileWrite] = []
        for at, write in enumerate(writes):
            if write.partial is not None and self._has_good_version(write.source.path):
                kept[at] = self.mark_failed(write.partial, write.source, status="partial")
            else:
                swap.append(write)
        if not swap:
            return kept
        with self.transaction():
            generation = self._renew_generation()
            swap_files(self.con, swap)
        self._generation = generation
        return kept

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
        return bool(chunks > 0 and (status == "ok" or chunks == stale))

    @guarded
    def mark_failed(
        self, problem: FileProblem, source: SourceFile | None, status: str = "failed"
    ) -> int:
        """Record why a file was dropped (or is partial); its earlier chunks stay, stale,
        when they are a version that parsed.

        A partial file's intact definitions are not such a version: kept stale, they would
        pass for one when the file came back partial (a `max_file_size` lowered, then
        restored), and stay stale where a fresh index has them fresh. They go, with the
        file's code graph rows, as a fresh index would have none for a dropped file.

        Returns how many chunks were kept as stale. A name that is not valid UTF-8 (its
        bytes kept as surrogates) is stored with `\xff` escapes: DuckDB takes only UTF-8,
        and the reason must still reach `status`.
        """
        from gbr.core.graph import store as graph_tables

        path = storable_text(problem.path)
        generation = None
        with self.transaction():
            if self._has_good_version(path) or not self._chunk_count(path):
                self.con.execute("UPDATE chunks SET stale = true WHERE path = ?", [path])
            else:
                generation = self._renew_generation()
                self.con.execute("DELETE FROM chunks WHERE path = ?", [path])
                graph_tables.remove(self.con, path)
            kept = self._chunk_count(path)
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
        if generation is not None:
            self._generation = generation
        return kept

    def _chunk_count(self, path: str) -> int:
        return int(
            self.con.execute("SELECT count(*) FROM chunks WHERE path = ?", [path]).fetchall()[0][0]
        )

    @guarded
    def remove_files(self, paths: Iterable[str]) -> int:
        from gbr.core.graph import store as graph_tables

        paths = list(paths)
        if not paths:
            return 0
        with self.transaction():
            generation = self._renew_generation()
            for path in paths:
                self.con.execute("DELETE FROM chunks WHERE path = ?", [path])
                self.con.execute("DELETE FROM files WHERE path = ?", [path])
                graph_tables.remove(self.con, path)
        self._generation = generation
        return len(paths)

    @guarded
    def fill_vectors(self, vectors: Mapping[str, np.ndarray]) -> int:
        """Give the chunks still without a vector theirs, by embed hash; returns how many.

        Matched on the hash and on the vector still being NULL: a chunk replaced since its
        text was read has another hash (or already a vector), so it never gets a stale one,
        and every chunk of the same text gets it at once.
        """
        if not vectors:
            return 0
        import pyarrow as pa  # here: a search never writes, and pyarrow costs it 0.2 s

        keys = list(vectors)
        table = pa.table(
            {
                "embed_hash": pa.array(keys, type=pa.string()),
                "embedding": vector_array([vectors[k] for k in keys]),
            }
        )
        with self.transaction():
            self.con.register("new_vectors", table)
            try:
                row = self.con.execute(
                    "UPDATE chunks SET embedding = v.embedding FROM new_vectors v "
                    "WHERE chunks.embed_hash = v.embed_hash AND chunks.embedding IS NULL"
                ).fetchall()
            finally:
                self.con.unregister("new_vectors")
        return int(row[0][0]) if row else 0

    @guarded
    def fill_from_index(self) -> int:
        """Give chunks without a vector the one the index holds for the same text elsewhere
        (code copied or moved between files); returns how many. One statement for a run,
        instead of a lookup per file written."""
        with self.transaction():
            row = self.con.execute(
                "UPDATE chunks SET embedding = k.embedding FROM (SELECT DISTINCT ON (embed_hash) "
                "embed_hash, embedding FROM chunks WHERE embedding IS NOT NULL AND embed_hash IN "
                "(SELECT embed_hash FROM chunks WHERE embedding IS NULL)) k "
                "WHERE chunks.embed_hash = k.embed_hash AND chunks.embedding IS NULL"
            ).fetchall()
        return int(row[0][0]) if row else 0

    # -------------------------------------------------------------- full text

    @guarded
    def refresh_fulltext(
        self, config: FtsConfig = DEFAULT_FTS, lend: TestWords | None = None
    ) -> None:
        """DuckDB's full-text index is a snapshot; rebuild it after a batch of writes, with
        the words tests lend as `lend` says (gbr.core.store.test_words; None: none)."""
        fulltext.refresh(self, config, lend)

    @guarded
    def update_fulltext(
        self,
        config: FtsConfig = DEFAULT_FTS,
        rebuild_share: float = 0.25,
        lend: TestWords | None = None,
    ) -> str:
        """Bring the full-text index up to date with the chunks: "rebuilt", "patched" or
        "unchanged" (see gbr.core.store.fulltext.update)."""
        return fulltext.update(self, config, rebuild_share, lend)

    @guarded
    def has_fulltext(self) -> bool:
        return fulltext.exists(self.con)

    @guarded
    def mark_fulltext_stale(self) -> None:
        """Remember, durably, that chunks changed after the last full-text rebuild."""
        fulltext.mark_stale(self)

    @guarded
    def fulltext_stale(self) -> bool:
        return self.meta().get("fulltext_stale") == "1"

    @guarded
    def fulltext_outdated(
        self, config: FtsConfig = DEFAULT_FTS, lend: TestWords | None = None
    ) -> bool:
        """Whether the full-text index was built with other settings (another gbr's default,
        or an eval variant's, or other words lent by tests), so that the next run rebuilds
        it even when no file changed."""
        return fulltext.outdated(self.meta(), config, lend)

    @guarded
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
                with writing(self.path):
                    self.con.execute("CHECKPOINT")
                return True
            except duckdb.TransactionException:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)  # a search takes milliseconds; try again when it is done

    # ---------------------------------------------------------------- reading
    # The queries live in gbr.core.store.queries; these are the store's guarded doors to them.

    @guarded
    def file_states(self) -> dict[str, FileState]:
        return store_queries.file_states(self.con)

    @guarded
    def cached_vectors(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already stored for these embedded texts, so they need no model run."""
        return store_queries.cached_vectors(self.con, hashes)

    @guarded
    def vectors(
        self, file: Path | None = None, write: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, unit vectors) of every chunk, for brute-force cosine in NumPy.

        With a `file` (gbr.core.store.vector_file.file_for), the rows are memory-mapped from it
        when it matches this index, and it is rebuilt when it does not (unless `write` is
        off: a daemon, which reloads after each change, reads them into memory then);
        without one, they are read from DuckDB into memory.
        """
        if file is None:
            return store_queries.vectors(self.con)
        return store_vectors.mapped_vectors(self.con, file, write)

    @guarded
    def mapped_vectors(self, file: Path) -> tuple[np.ndarray, np.ndarray] | None:
        """The vector file's (ids, mapped rows) when it matches this index, else None."""
        return store_vectors.mapped(self.con, file)

    @guarded
    def refresh_vectors(
        self, file: Path, before: tuple[np.ndarray, np.ndarray] | None = None
    ) -> None:
        """Bring the vector file up to date with this index, reusing the rows of `before`
        (the vectors of the index this one is a changed copy of) for the chunks it kept."""
        store_vectors.refresh(self.con, file, before)

    @guarded
    def chunk_count(self) -> int:
        return store_queries.chunk_count(self.con)

    @guarded
    def coverage(self) -> tuple[int, int]:
        """(chunks with a vector, all chunks).

        A good vector file beside the index says every chunk has one: it is written only
        when none is missing, and a vector never goes back to NULL while its chunk's id
        stays. Counting the embedding column instead read all of it (2-5 s and 2 GB at 1M
        chunks, for every `status`)."""
        whole = store_vectors.complete_count(self.con, vector_file.file_for(self.path))
        if whole is not None:
            return whole, whole
        return store_queries.coverage(self.con)

    @guarded
    def missing_vectors(
        self, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[int, str, Chunk]]:
        """A page of texts still without a vector (see store_queries.missing_vectors)."""
        return store_queries.missing_vectors(self.con, after, limit)

    @guarded
    def bm25(
        self, query: str, limit: int, where: SearchFilter = NO_FILTER
    ) -> list[tuple[int, float]]:
        """Best BM25 matches among the chunks that the filter lets through."""
        return store_queries.bm25(self.con, query, limit, where)

    @guarded
    def query_terms(self, words: str) -> list[str]:
        """The query's distinct terms, as the full-text index tokenizes and stems them."""
        return postings_memory.query_terms(self.con, words)

    @guarded
    def memory_postings(self, budget: int) -> postings_memory.MemoryPostings | None:
        """The full-text index's postings in memory, or None when they would take more
        than `budget` bytes (or the index predates the postings table)."""
        try:
            count = postings_memory.postings_count(self.con)
        except duckdb.CatalogException:
            return None
        if count * postings_memory.BYTES_PER_POSTING > budget:
            return None
        self.con.begin()  # one snapshot for the postings and the state they are of
        try:
            return postings_memory.MemoryPostings.load(self.con)
        finally:
            self.con.rollback()

    @guarded
    def memory_rows(self, budget: int) -> MemoryRows | None:
        """Every chunk row in memory (gbr.core.store.rows_memory), or None when they would take
        more than `budget` bytes."""
        from gbr.core.store import rows_memory  # brings pyarrow, which a one-query search skips

        if budget <= 0 or rows_memory.rows_bytes(self.con) > budget:
            return None
        return rows_memory.MemoryRows.load(self.con)  # one statement: one snapshot

    @guarded
    def fulltext_state(self) -> tuple[int, int] | None:
        """The full-text index's state (postings_memory.state); None without one."""
        try:
            return postings_memory.state(self.con)
        except duckdb.CatalogException:
            return None

    @guarded
    def ids_matching(self, where: SearchFilter) -> list[int]:
        return store_queries.ids_matching(self.con, where)

    @guarded
    def ids_named(
        self, name: str, module: str = "", where: SearchFilter = NO_FILTER, limit: int = 50
    ) -> list[int]:
        """Chunks of the definitions a query names (gbr.core.rank.priors.named_in)."""
        return store_queries.ids_named(self.con, name, module, where, limit)

    @guarded
    def any_chunk(self, where: SearchFilter) -> bool:
        return store_queries.any_chunk(self.con, where)

    @guarded
    def modules(self) -> list[str]:
        return store_queries.modules(self.con)

    @guarded
    def folders(self) -> list[str]:
        return store_queries.folders(self.con)

    @guarded
    def chunk_rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        return store_queries.chunk_rows(self.con, ids)

    @guarded
    def nodes_parts(
        self, nodes: Sequence[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], list[NodePart]]:
        """Every part of each (path, kind, name) node, in order, in one query; a name is
        unique per kind within a file."""
        return store_queries.nodes_parts(self.con, nodes)

    @guarded
    def counts(self) -> IndexCounts:
        return store_queries.counts(self.con)

    @guarded
    def failed_files(self, status: str = "failed") -> list[FileIssue]:
        """Files of a status (`failed`, or `partial`), with their chunks and stale ones."""
        return store_queries.failed_files(self.con, status)

    def last_run(self) -> dict[str, Any] | None:
        """The summary of the last finished run, as `index --json` printed it."""
        raw = self.meta().get("last_run")
        return json.loads(raw) if raw else None


class ThreadLocalStore(Store):
    """One Store shared by many threads: each thread gets its own cursor on first use.

    A DuckDB connection must not run queries from two threads at once, while cursors of
    one connection are independent and cheap. The daemon's request threads and its actors
    all search through one of these; a thread pool reuses its threads, so the number of
    cursors stays at the number of threads.
    """

    def __init__(self, base: Store) -> None:
        # The base connection is kept for `close`; queries go through `con`, per thread.
        super().__init__(base.con, base.path, base.read_only)
        self._base = base
        self._local = threading.local()
        self._cursors: list[Store] = []
        self._lock = threading.Lock()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        mine: Store | None = getattr(self._local, "store", None)
        if mine is None:
            mine = self._base.cursor()
            self._local.store = mine
            with self._lock:
                self._cursors.append(mine)
        return mine.con

    def cursor(self) -> Store:
        """A connection of the caller's own, closed by the caller, that is not kept as a
        thread's cursor (a short-lived thread would leave its cursor here for good)."""
        return self._base.cursor()

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
        "embedded": embedded_json(store.coverage()),
        "dropped": [f.as_dict() for f in store.failed_files()],
        "partial": [f.as_dict() for f in store.failed_files("partial")],
        "last_run": store.last_run(),
    }


def embedded_json(coverage: tuple[int, int]) -> dict[str, int]:
    """`"embedded": {"chunks": N, "of": M}` in `search --json` and `status --json`."""
    return {"chunks": coverage[0], "of": coverage[1]}


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


def check_root(store: Store, root: Path, db: Path) -> None:
    """One index file serves one root: paths in it are relative to that root.

    An index inside its own tree moves with it, so only an outside one is checked.
    """
    have = store.meta().get("root")
    if have is None or db.resolve().is_relative_to(root):
        store.set_meta(root=str(root))
    elif have != str(root):
        raise ConfigError(
            f"{store.path} indexes {have}, not {root}; pass --db with another file for this tree"
        )
