"""What the store reads: the queries behind search and status, over one DuckDB connection.

Filters arrive as `SearchFilter` records and become SQL here, with every value bound as a
parameter; rows leave as records (gbr.core.records). `Store` is the only caller, and wraps
each query so that DuckDB's errors reach nobody else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from gbr.core.errors import StoreError
from gbr.core.records import (
    Chunk,
    ChunkRow,
    FileIssue,
    FileState,
    IndexCounts,
    NodePart,
    SearchFilter,
)
from gbr.core.store import postings
from gbr.core.store.fulltext import FTS_SCHEMA
from gbr.core.telemetry import log

if TYPE_CHECKING:
    import pyarrow as pa

Connection = duckdb.DuckDBPyConnection

# The columns of a ChunkRow, in its field order (gbr.core.records.ChunkRow).
CHUNK_ROW_COLUMNS = (
    "id, path, module, package, kind, name, signature, visibility, start_line, end_line, "
    "part, parts, coalesce(doc, '') AS doc, text, coalesce(header, '') AS header, stale"
)

# What `--tests exclude` keeps out; mirrors gbr.core.rank.priors.is_aside().
ASIDE_SQL = (
    "(regexp_matches(path, '(^|/)(test|tests|integration_tests?|examples?|demos?)/')"
    " OR regexp_matches(path, '_test\\.gleam$') OR ends_with(name, '_test'))"
)


def filter_sql(where: SearchFilter) -> tuple[str, list[object]]:
    """The filter as a condition over the chunks table, and the values it binds."""
    clauses: list[str] = []
    params: list[object] = []
    if where.path:
        if any(ch in where.path for ch in "*?["):
            clauses.append("path GLOB ?")
        else:
            clauses.append("starts_with(path, ?)")
        params.append(where.path)
    if where.module:
        clauses.append("(module = ? OR starts_with(module, ?))")
        params += [where.module, where.module.rstrip("/") + "/"]
    if where.kinds:
        clauses.append(f"kind IN ({', '.join('?' for _ in where.kinds)})")
        params += list(where.kinds)
    if where.tests == "exclude":
        clauses.append(f"NOT {ASIDE_SQL}")
    return " AND ".join(clauses) or "true", params


def has_table(con: Connection, name: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
    ).fetchall()[0]
    return bool(row and row[0])


def file_states(con: Connection) -> dict[str, FileState]:
    if not has_table(con, "files"):
        return {}
    rows = con.execute("SELECT path, content_hash, status, error FROM files").fetchall()
    return {p: FileState(h or "", s, e or "") for p, h, s, e in rows}


def vectors(con: Connection) -> tuple[np.ndarray, np.ndarray]:
    """(ids, unit vectors) of every chunk that has its vector, for brute-force cosine in NumPy."""
    if not has_table(con, "chunks"):  # a new index whose first run has not begun
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    table = con.execute(
        "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id"
    ).to_arrow_table()
    ids = table.column("id").to_numpy()
    if table.num_rows == 0:
        return ids, np.zeros((0, 0), dtype=np.float32)
    rows = matrix(table.column("embedding"))
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():  # only a hand-edited index holds them: never scored
        log().warning("vectors_not_finite", chunks=int((~finite).sum()))
        return ids[finite], rows[finite]
    return ids, rows


def cached_vectors(con: Connection, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors already stored for these embedded texts, so they need no model run."""
    if not hashes or not has_table(con, "chunks"):
        return {}
    table = con.execute(
        "SELECT DISTINCT ON (embed_hash) embed_hash, embedding FROM chunks "
        "WHERE embed_hash IN (SELECT unnest(?)) AND embedding IS NOT NULL",
        [list(hashes)],
    ).to_arrow_table()
    if table.num_rows == 0:
        return {}
    found = matrix(table.column("embedding"))
    keys = table.column("embed_hash").to_pylist()
    finite = np.isfinite(found).all(axis=1)
    return {k: found[i] for i, k in enumerate(keys) if finite[i]}


def chunk_count(con: Connection) -> int:
    if not has_table(con, "chunks"):
        return 0
    return int(con.execute("SELECT count(*) FROM chunks").fetchall()[0][0])


def coverage(con: Connection) -> tuple[int, int]:
    """(chunks with a vector, all chunks): how much of the index dense search can see."""
    if not has_table(con, "chunks"):
        return 0, 0
    row = con.execute("SELECT count(embedding), count(*) FROM chunks").fetchall()[0]
    return int(row[0]), int(row[1])


def missing_vectors(
    con: Connection, after: tuple[int, str] | None, limit: int
) -> list[tuple[int, str, Chunk]]:
    """Up to `limit` texts still without a vector, one chunk each, as (tokens, embed hash,
    chunk), in (tokens, hash) order after `after`: the caller pages through them, and each
    page holds texts of about one length, so a model batch pads little."""
    if not has_table(con, "chunks"):
        return []
    start = after if after is not None else (-1, "")
    rows = con.execute(
        "SELECT DISTINCT ON (tokens, embed_hash) tokens, embed_hash, path, module, package, "
        "kind, name, signature, visibility, start_line, end_line, part, parts, "
        "coalesce(doc, ''), text, coalesce(header, '') FROM chunks "
        "WHERE embedding IS NULL AND (tokens, embed_hash) > (?, ?) "
        "ORDER BY tokens, embed_hash LIMIT ?",
        [start[0], start[1], limit],
    ).fetchall()
    return [(int(r[0]), str(r[1]), Chunk(*r[2:])) for r in rows]


def matrix(column: pa.ChunkedArray) -> np.ndarray:
    flat = column.combine_chunks()
    dim = flat.type.list_size
    vectors: np.ndarray = flat.flatten().to_numpy(zero_copy_only=False)
    return vectors.reshape(-1, dim).astype(np.float32)


def bm25(con: Connection, query: str, limit: int, where: SearchFilter) -> list[tuple[int, float]]:
    """Best BM25 matches among the chunks the filter lets through, from the postings table
    (gbr.core.store.postings) or, in an index built before it existed, DuckDB's own macro."""
    if not query.strip():
        return []
    clause, params = filter_sql(where)
    try:
        return postings.top(con, FTS_SCHEMA, query, limit, clause, params)
    except duckdb.CatalogException:
        pass  # an index built before the postings table: DuckDB's own macro, until rebuilt
    try:
        rows = con.execute(
            f"SELECT id, score FROM (SELECT {postings.TIE_ORDER}, "
            f"round({FTS_SCHEMA}.match_bm25(id, ?), {postings.SCORE_DECIMALS}) AS score "
            f"FROM chunks WHERE {clause}) WHERE score IS NOT NULL "
            f"ORDER BY score DESC, {postings.TIE_ORDER} LIMIT ?",
            [query, *params, limit],
        ).fetchall()
    except duckdb.CatalogException as exc:
        raise StoreError(
            "the full-text index is missing; run `gleambrctl index` to rebuild it"
        ) from exc
    return [(int(i), float(s)) for i, s in rows]


def ids_matching(con: Connection, where: SearchFilter) -> list[int]:
    clause, params = filter_sql(where)
    return [r[0] for r in con.execute(f"SELECT id FROM chunks WHERE {clause}", params).fetchall()]


def ids_named(
    con: Connection, name: str, module: str, where: SearchFilter, limit: int
) -> list[int]:
    """Chunks of the definitions called `name` in any case (in `module`, or a module ending
    with `/module`, when given), and of the custom types that have a constructor so called,
    among the chunks the filter lets through."""
    clause, params = filter_sql(where)
    in_module = "(module = ? OR ends_with(module, ?))" if module else "true"
    scope = [module, "/" + module] if module else []
    rows = con.execute(
        f"SELECT id FROM chunks WHERE {clause} AND kind <> 'module' AND lower(name) = lower(?) "
        f"AND {in_module} ORDER BY id LIMIT ?",
        [*params, name, *scope, limit],
    ).fetchall()
    if not has_table(con, "graph_symbols"):
        return [int(r[0]) for r in rows]
    typed = con.execute(
        f"SELECT id FROM chunks WHERE {clause} AND kind = 'type' AND (module, name) IN ("
        "SELECT module, parent FROM graph_symbols WHERE kind = 'constructor' "
        f"AND lower(name) = lower(?) AND {in_module}) ORDER BY id LIMIT ?",
        [*params, name, *scope, limit],
    ).fetchall()
    return list(dict.fromkeys(int(r[0]) for r in rows + typed))


def any_chunk(con: Connection, where: SearchFilter) -> bool:
    clause, params = filter_sql(where)
    return (
        con.execute(f"SELECT 1 FROM chunks WHERE {clause} LIMIT 1", params).fetchone() is not None
    )


def modules(con: Connection) -> list[str]:
    """Every module that has a chunk, in order."""
    rows = con.execute("SELECT DISTINCT module AS v FROM chunks ORDER BY v").fetchall()
    return [str(value) for (value,) in rows]


def folders(con: Connection) -> list[str]:
    """Every folder that holds a chunk's file, with its trailing slash ("" for the root)."""
    rows = con.execute(
        "SELECT DISTINCT regexp_replace(path, '[^/]*$', '') AS v FROM chunks ORDER BY v"
    ).fetchall()
    return [str(value) for (value,) in rows]


def chunk_rows(con: Connection, ids: Sequence[int]) -> dict[int, ChunkRow]:
    if not ids:
        return {}
    # The ids are written into the SQL, not bound: DuckDB's Python binding tries to
    # import pandas for every bound list, which cost a quarter of a warm search here.
    id_list = ", ".join(str(int(i)) for i in ids)
    rows = con.execute(f"SELECT {CHUNK_ROW_COLUMNS} FROM chunks WHERE id IN ({id_list})").fetchall()
    return {row[0]: ChunkRow(*row) for row in rows}


def nodes_parts(
    con: Connection, nodes: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], list[NodePart]]:
    """One scan for all the nodes: a query per node read the whole table each time."""
    if not nodes:
        return {}
    values = ", ".join("(?, ?, ?)" for _ in nodes)
    rows = con.execute(
        "SELECT c.path, c.kind, c.name, c.start_line, c.end_line, c.part, c.text FROM chunks c "
        f"JOIN (VALUES {values}) AS n(path, kind, name) "
        "ON c.path = n.path AND c.kind = n.kind AND c.name = n.name ORDER BY c.part",
        [v for node in nodes for v in node],
    ).fetchall()
    out: dict[tuple[str, str, str], list[NodePart]] = {}
    for path, kind, name, *part in rows:
        out.setdefault((path, kind, name), []).append(NodePart(*part))
    return out


def counts(con: Connection) -> IndexCounts:
    if not has_table(con, "files"):
        return IndexCounts(
            files=0, files_ok=0, files_failed=0, files_partial=0, chunks=0, stale_chunks=0
        )
    files_ok, files_failed, files_partial = con.execute(
        "SELECT count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'failed'), "
        "count(*) FILTER (status = 'partial') FROM files"
    ).fetchall()[0]
    chunks, stale = con.execute("SELECT count(*), count(*) FILTER (stale) FROM chunks").fetchall()[
        0
    ]
    return IndexCounts(
        files=int(files_ok) + int(files_failed) + int(files_partial),
        files_ok=int(files_ok),
        files_failed=int(files_failed),
        files_partial=int(files_partial),
        chunks=int(chunks),
        stale_chunks=int(stale),
    )


def failed_files(con: Connection, status: str) -> list[FileIssue]:
    """Files of a status (`failed`, or `partial`), with their chunks and stale ones."""
    if not has_table(con, "files"):
        return []
    rows = con.execute(
        "SELECT f.path, f.error_kind, f.error, "
        "(SELECT count(*) FILTER (c.stale) FROM chunks c WHERE c.path = f.path), "
        "(SELECT count(*) FROM chunks c WHERE c.path = f.path) "
        "FROM files f WHERE status = ? ORDER BY path",
        [status],
    ).fetchall()
    return [FileIssue(*row) for row in rows]
