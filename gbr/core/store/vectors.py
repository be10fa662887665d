"""The index's vectors between DuckDB and the file beside it (gbr.core.store.vector_file).

Readers map the file when its fingerprint matches the index and rebuild it when not. An
`index` run refreshes it after renaming its copy over the index, carrying the rows of the
chunks it kept from the file it started from and reading only the new ones, so that the
first `search` after a run maps the file instead of reading every vector.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from gbr.core.store import vector_file
from gbr.core.store.queries import has_table, matrix, vectors
from gbr.core.store.vector_file import Fingerprint
from gbr.core.telemetry import log

Connection = duckdb.DuckDBPyConnection
Vectors = tuple[np.ndarray, np.ndarray]

GENERATION_KEY = "vectors_generation"
SPOT_CHECKS = 16  # carried rows compared with DuckDB's before a refreshed file is written


def fingerprint(con: Connection) -> Fingerprint:
    """The fingerprint of the vectors in the index now (about 2 ms at 100k chunks)."""
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    count, total, xor, top = con.execute(
        "SELECT count(*), coalesce(sum(id), 0), coalesce(bit_xor(id), 0), coalesce(max(id), 0) "
        "FROM chunks"
    ).fetchall()[0]
    return Fingerprint(
        model_id=meta.get("model_id", ""),
        dim=int(meta.get("dim") or 0),
        generation=meta.get(GENERATION_KEY, ""),
        count=int(count),
        id_sum=int(total),
        id_xor=int(xor),
        id_max=int(top),
    )


def mapped(con: Connection, path: Path, verify_rows: bool = True) -> Vectors | None:
    """The file's (ids, rows) when it holds exactly this index's vectors, else None; a
    damaged file is reported and treated as missing."""
    try:
        return vector_file.load(path, fingerprint(con), verify_rows)
    except (vector_file.DamagedFile, OSError, ValueError) as exc:
        log().warning("vector_file_damaged", path=str(path), problem=str(exc))
        return None


def complete_count(con: Connection, path: Path) -> int | None:
    """The number of chunks when the vector file at `path` holds this index's vectors
    (then every chunk has one), else None; a missing file costs a stat."""
    if not path.is_file() or not has_table(con, "chunks"):
        return None
    found = mapped(con, path, verify_rows=False)  # the ids say every chunk has a vector
    return None if found is None else int(found[0].shape[0])


def mapped_vectors(con: Connection, path: Path, write: bool = True) -> Vectors:
    """(ids, unit vectors) from the vector file at `path` when it matches the index, else
    read from DuckDB and (with `write`) written there for the next reader.

    A damaged file is rebuilt, with an event saying why. A folder that will not take the
    file costs nothing but the speed: the vectors are served from memory, as before.
    """
    if not has_table(con, "chunks"):
        return vectors(con)
    con.begin()  # one snapshot for the fingerprint and the rows it names
    try:
        want = fingerprint(con)
        found = mapped(con, path) if want.count else None
        if found is not None:
            return found
        ids, rows = vectors(con)
    finally:
        con.rollback()
    if want.count and write:
        _write(path, want, ids, rows)
    return ids, rows


def refresh(con: Connection, path: Path, before: Vectors | None) -> None:
    """Write the file for this index, taking the rows of ids up to the last one in `before`
    (the file of the index this one was copied from) from there, and the rest from DuckDB.

    Sound because a chunk's vector never changes in place and a copy's sequence goes on
    from the original's: an id the copy shares with its original is the same chunk. A
    few carried rows are still compared with DuckDB's; any doubt reads everything.
    """
    if not has_table(con, "chunks"):
        return
    con.begin()
    try:
        want = fingerprint(con)
        if not want.count or mapped(con, path) is not None:
            return
        carried = _carry(con, before, want) if before is not None else None
        ids, rows = carried if carried is not None else vectors(con)
    finally:
        con.rollback()
    _write(path, want, ids, rows)


def _carry(con: Connection, before: Vectors, want: Fingerprint) -> Vectors | None:
    old_ids, old_rows = before
    if old_rows.ndim != 2 or old_rows.shape[1] != want.dim or old_ids.shape[0] == 0:
        return None
    ids = con.execute("SELECT id FROM chunks ORDER BY id").fetchnumpy()["id"].astype(np.int64)
    last = int(old_ids[-1])
    kept = ids[ids <= last]
    at = np.searchsorted(old_ids, kept)
    if at.size and (int(at.max()) >= old_ids.shape[0] or not np.array_equal(old_ids[at], kept)):
        return None  # an id the old file does not have: not a copy of that index
    table = con.execute(
        "SELECT id, embedding FROM chunks WHERE id > ? ORDER BY id", [last]
    ).to_arrow_table()
    new_rows = (
        matrix(table.column("embedding"))
        if table.num_rows
        else np.zeros((0, want.dim), dtype=np.float32)
    )
    rows = np.concatenate([np.asarray(old_rows[at]), new_rows])
    if rows.shape != (want.count, want.dim) or not _spot_check(con, ids, rows):
        return None
    return ids, rows


def _spot_check(con: Connection, ids: np.ndarray, rows: np.ndarray) -> bool:
    picks = np.unique(np.linspace(0, ids.shape[0] - 1, SPOT_CHECKS).astype(np.int64))
    id_list = ", ".join(str(int(ids[i])) for i in picks)
    table = con.execute(
        f"SELECT id, embedding FROM chunks WHERE id IN ({id_list}) ORDER BY id"
    ).to_arrow_table()
    truth = matrix(table.column("embedding"))
    return bool(truth.shape[0] == picks.shape[0] and np.array_equal(truth, rows[picks]))


def _write(path: Path, want: Fingerprint, ids: np.ndarray, rows: np.ndarray) -> None:
    if rows.shape != (want.count, want.dim):  # the meta's dim is not the rows': serve, skip
        return
    try:
        vector_file.write(path, want, ids, rows)
    except (OSError, ValueError) as exc:
        log().warning("vector_file_unwritable", path=str(path), problem=str(exc))
