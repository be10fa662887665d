"""Chunk rows held in memory, for a searcher that answers many queries.

Every hybrid query reads back the rows of its candidates (about 60 ids) and, when a hit is
one part of a split node, that node's other parts. DuckDB has no point lookup for a list
of ids: it scans the whole table and joins, 3-4 ms at 100k chunks whatever the SQL shape
(`IN`, a join on `unnest`, rowids, an ART index: measured), about a fifth of a warm query.
A daemon answers thousands of queries from one state of the index, so it reads the rows
once into one Arrow table sorted by id; a lookup is then a binary search and a `take`
(0.2 ms for 60 ids).

A row never changes under its id: a changed file gets new chunks with new ids (ids are
never reused), and the only columns updated in place are `stale` and the vector, which
search does not read. So rows held from one state stay right for every id they hold; an
id they lack (written after they were read) is read from DuckDB, and the searcher drops
them at its next reload, with its vectors and postings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from gbr.core.records import ChunkRow, NodePart
from gbr.core.store.queries import CHUNK_ROW_COLUMNS

# Per row beyond its strings: 8 numbers, a flag, and Arrow's offsets for 9 strings.
ROW_OVERHEAD = 80


def rows_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """About what `MemoryRows.load` would hold, without reading the rows."""
    (size,) = con.execute(
        "SELECT coalesce(sum(strlen(path) + strlen(module) + strlen(package)"
        " + strlen(kind) + strlen(name) + strlen(signature)"
        " + strlen(visibility) + strlen(coalesce(doc, '')) + strlen(text)"
        f" + strlen(coalesce(header, '')) + {ROW_OVERHEAD}), 0) FROM chunks"
    ).fetchall()[0]
    return int(size)


@dataclass(frozen=True, slots=True)
class MemoryRows:
    """Every chunk row of one state, sorted by id."""

    ids: np.ndarray  # int64, ascending
    table: pa.Table  # CHUNK_ROW_COLUMNS, row for row with `ids`

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> MemoryRows:
        result = con.execute(f"SELECT {CHUNK_ROW_COLUMNS} FROM chunks ORDER BY id").arrow()
        table = result if isinstance(result, pa.Table) else result.read_all()
        ids = np.asarray(table.column("id").to_numpy(), dtype=np.int64)
        return cls(ids, table)

    def rows(self, ids: Sequence[int]) -> tuple[dict[int, ChunkRow], list[int]]:
        """The rows held for `ids`, by id, and the ids not held (in their order)."""
        if len(ids) == 0 or len(self.ids) == 0:
            return {}, list(ids)
        wanted = np.asarray(ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        held = self.ids[at] == wanted
        found = self._take(at[held])
        missing = [int(i) for i in wanted[~held]]
        return {row.id: row for row in found}, missing

    def parts(self, row: ChunkRow) -> list[NodePart] | None:
        """Every part of `row`'s node, in order, or None unless all `row.parts` are held.

        A node's parts are written together, so their ids are neighbours: the search looks
        only at the `parts` rows on each side of this one and checks each by its node."""
        at = int(np.searchsorted(self.ids, row.id))
        if at >= len(self.ids) or self.ids[at] != row.id:
            return None
        lo, hi = max(0, at - row.parts), min(len(self.ids), at + row.parts + 1)
        near = self._take(np.arange(lo, hi))
        mine = sorted(
            (r for r in near if (r.path, r.kind, r.name) == (row.path, row.kind, row.name)),
            key=lambda r: r.part,
        )
        if [r.part for r in mine] != list(range(row.parts)):  # parts count from 0
            return None
        return [NodePart(r.start_line, r.end_line, r.part, r.text) for r in mine]

    def _take(self, positions: np.ndarray) -> list[ChunkRow]:
        if len(positions) == 0:
            return []
        picked = self.table.take(pa.array(positions, type=pa.int64()))
        columns = [column.to_pylist() for column in picked.columns]
        return [ChunkRow(*values) for values in zip(*columns, strict=True)]
