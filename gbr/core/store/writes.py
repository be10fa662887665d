"""How a write reaches the index file: one transaction per change, and new chunks as one
Arrow table for a single bulk INSERT. `Store`'s write methods use these."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from gbr.core.records import Chunk, FileProblem, SourceFile
from gbr.core.store.errors import is_write_failure, store_error, write_error, writing
from gbr.core.store.handle import StoreHandle

if TYPE_CHECKING:
    import pyarrow as pa

    from gbr.core.graph.model import FileGraph


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk plus the derived texts and vector, as the Writer hands it to the store.

    `vector` is None for a chunk written before its vector exists: it is searchable by
    BM25 at once, and `Store.fill_vectors` gives it the vector later (gbr.actors.pipeline).
    """

    chunk: Chunk
    search_text: str
    tokens: int
    embed_hash: str
    vector: np.ndarray | None


@dataclass(frozen=True, slots=True)
class FileWrite:
    """One file's new version for `Store.replace_files`: its chunks, whether only part of
    it parsed, and its code graph rows."""

    source: SourceFile
    chunks: Sequence[StoredChunk]
    partial: FileProblem | None = None
    graph: FileGraph | None = None


def swap_files(con: duckdb.DuckDBPyConnection, writes: Sequence[FileWrite]) -> None:
    """Replace these files' rows, in the caller's transaction: one DELETE per table for
    all their paths, then one INSERT per table for all their new rows."""
    import pyarrow as pa  # here: a search never writes, and pyarrow costs it 0.2 s

    # A file written twice in one batch keeps its last version, as two transactions would.
    writes = list({w.source.path: w for w in writes}.values())
    paths = [w.source.path for w in writes]
    for table in ("chunks", "files"):
        con.execute(f"DELETE FROM {table} WHERE path IN (SELECT unnest(?::VARCHAR[]))", [paths])
    from gbr.core.graph import store as graph_tables

    graph_tables.replace_many(con, [(w.source.path, w.graph) for w in writes])
    chunks = chunks_table([c for w in writes for c in w.chunks])
    if chunks.num_rows:
        con.register("new_chunks", chunks)
        try:
            con.execute("INSERT INTO chunks SELECT nextval('chunk_ids'), * FROM new_chunks")
        finally:
            con.unregister("new_chunks")
    now = time.time()
    files = pa.table(
        {
            "path": pa.array(paths, type=pa.string()),
            "module": pa.array([w.source.module for w in writes], type=pa.string()),
            "package": pa.array([w.source.package for w in writes], type=pa.string()),
            "content_hash": pa.array([w.source.content_hash for w in writes], type=pa.string()),
            "size": pa.array([w.source.size for w in writes], type=pa.int64()),
            "mtime": pa.array([w.source.mtime for w in writes], type=pa.float64()),
            "status": pa.array(["partial" if w.partial else "ok" for w in writes]),
            "error_kind": pa.array([w.partial.kind if w.partial else None for w in writes]),
            "error": pa.array([w.partial.reason if w.partial else None for w in writes]),
            "indexed_at": pa.array([now] * len(writes), type=pa.float64()),
        }
    )
    con.from_arrow(files).insert_into("files")


class Transaction:
    """BEGIN/COMMIT, with ROLLBACK on any error so a failed write leaves no trace.

    A commit that fails for a cause outside gbr (no permission, disk full, no file
    descriptors) becomes a StoreWriteError naming the cause and the fix. DuckDB has often
    aborted the transaction itself by then, and a ROLLBACK would raise "no transaction is
    active" over the real cause, so the rollback's own failure is ignored. Any other DuckDB
    error in the transaction leaves it as a StoreError (gbr.core.store.errors).
    """

    def __init__(self, store: StoreHandle) -> None:
        self.store = store
        self.con = store.con

    def __enter__(self) -> None:
        try:
            with writing(self.store.path):
                self.con.begin()
        except duckdb.Error as exc:
            raise store_error(self.store.path, exc) from exc

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self._rollback()
            if is_write_failure(exc):
                raise write_error(self.store.path, exc) from exc
            if isinstance(exc, duckdb.Error):
                raise store_error(self.store.path, exc) from exc
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


_TEXT_COLUMNS = ("path", "module", "package", "kind", "name", "signature", "visibility")
_INT_COLUMNS = ("start_line", "end_line", "part", "parts")
_TAIL_TEXT_COLUMNS = ("doc", "text", "header")


def chunks_table(items: Sequence[StoredChunk]) -> pa.Table:
    """Rows in the column order of the chunks table (after id), for one bulk INSERT."""
    import pyarrow as pa  # here: a search never writes, and pyarrow costs it 0.2 s

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
    arrays["embedding"] = vector_array([i.vector for i in items])
    return pa.table(arrays)


def vector_array(vectors: Sequence[np.ndarray | None]) -> pa.Array:
    """Vectors as one Arrow column; a None becomes NULL (a chunk still to embed).

    With no vector at all the column is of Arrow's null type, which DuckDB casts to any
    array size (a NULL FLOAT[1] would not become a FLOAT[384])."""
    import pyarrow as pa  # here: a search never writes, and pyarrow costs it 0.2 s

    known = [v for v in vectors if v is not None]
    if vectors and not known:
        return pa.nulls(len(vectors))
    dim = int(known[0].shape[0]) if known else 1
    zeros = np.zeros(dim, dtype=np.float32)
    flat = (
        np.concatenate([zeros if v is None else np.asarray(v, dtype=np.float32) for v in vectors])
        if vectors
        else np.zeros(0, dtype=np.float32)
    )
    mask = pa.array([v is None for v in vectors]) if len(known) < len(vectors) else None
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), dim, mask=mask)
