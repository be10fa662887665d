"""The code graph's tables, written with a file's chunks and read by `refs`/`callers`/`graph`.

Rows are keyed by the file's path, so a changed file replaces only its own rows, in the
transaction that replaces its chunks: the graph is never fresher or staler than search.
Whether a target lies inside the indexed tree is decided here, when reading, by a join with
the definitions (see gbr.core.graph.model); a dependency indexed later (`--include-deps`)
turns external targets into internal ones with no rewrite.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from gbr.core.errors import (
    AmbiguousNameError,
    GbrError,
    GraphMissingError,
    IndexEmptyError,
    NameNotFoundError,
)
from gbr.core.graph.model import MAX_DEPTH, Definition, FileGraph, in_degrees

# Bumped when extraction changes what it finds: an index of another version re-reads every
# file (its vectors stay cached, so only parsing is repeated).
GRAPH_VERSION = "1"
TABLES = ("graph_symbols", "graph_imports", "graph_refs")
# Reference kinds that make the referring definition a caller of the target.
CALL_KINDS = ("call", "pipe", "capture", "value", "use")
REINDEX = "run `gleambrctl index` again to build it"

_SCHEMA = {
    "graph_symbols": "path VARCHAR, module VARCHAR, name VARCHAR, kind VARCHAR, "
    "line INTEGER, col INTEGER, public BOOLEAN, parent VARCHAR",
    "graph_imports": "path VARCHAR, module_from VARCHAR, line INTEGER, col INTEGER, "
    "module VARCHAR, alias VARCHAR, names VARCHAR",
    "graph_refs": "path VARCHAR, module_from VARCHAR, source_name VARCHAR, line INTEGER, "
    "col INTEGER, kind VARCHAR, target_module VARCHAR, target_name VARCHAR",
}


# ------------------------------------------------------------------------------- writing


def prepare(con: duckdb.DuckDBPyConnection, have: dict[str, str], wiped: bool) -> dict[str, str]:
    """Create the tables, in the caller's transaction; returns the meta to record.

    An index written before the graph existed, or by another graph version, forgets its
    files' hashes, so the next run re-parses every file and fills the graph; the chunks and
    their vectors stay and are reused, so this costs a parse per file, not an embedding.
    """
    stale = have.get("graph_version") != GRAPH_VERSION
    if wiped or stale:
        for table in TABLES:
            con.execute(f"DROP TABLE IF EXISTS {table}")
    for table, columns in _SCHEMA.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {table}({columns})")
    if stale and not wiped and have.get("schema_version"):
        con.execute("UPDATE files SET content_hash = ''")
    return {"graph_version": GRAPH_VERSION}


def remove(con: duckdb.DuckDBPyConnection, path: str) -> None:
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE path = ?", [path])


def replace(con: duckdb.DuckDBPyConnection, path: str, graph: FileGraph | None) -> None:
    """Swap a file's rows for `graph`'s, in the caller's transaction (None: no rows)."""
    replace_many(con, [(path, graph)])


def replace_many(
    con: duckdb.DuckDBPyConnection, graphs: Sequence[tuple[str, FileGraph | None]]
) -> None:
    """Swap each file's rows for its graph's (None: no rows), in the caller's transaction:
    one DELETE and one INSERT per table for all the files."""
    paths = [path for path, _ in graphs]
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE path IN (SELECT unnest(?::VARCHAR[]))", [paths])
    rows: dict[str, list[tuple[Any, ...]]] = {table: [] for table in TABLES}
    for path, graph in graphs:
        if graph is None:
            continue
        mod = graph.module
        rows["graph_symbols"].extend(
            (path, s.module, s.name, s.kind, s.line, s.col, s.public, s.parent)
            for s in graph.symbols
        )
        rows["graph_imports"].extend(
            (path, mod, i.line, i.col, i.module, i.alias, json.dumps([list(n) for n in i.names]))
            for i in graph.imports
        )
        rows["graph_refs"].extend(
            (path, mod, r.source_name, r.line, r.col, r.kind, r.target_module, r.target_name)
            for r in graph.references
            if r.target_module and r.target_name
        )
    for table, items in rows.items():
        if items:
            _insert(con, table, items)


def _insert(con: duckdb.DuckDBPyConnection, table: str, items: list[tuple[Any, ...]]) -> None:
    """One bulk INSERT through Arrow: ~2 ms for a file's 130 references, where
    `executemany` took 400 ms and a multi-row VALUES 570 ms (measured on 2 loaded cores)."""
    import pyarrow as pa  # here: a search never writes, and pyarrow costs it 0.2 s

    names = [c.split()[0] for c in _SCHEMA[table].split(", ")]
    arrow = pa.table({name: [row[i] for row in items] for i, name in enumerate(names)})
    con.from_arrow(arrow).insert_into(table)


# ------------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class Target:
    """A graph node: `module.name`, inside the indexed tree or not."""

    module: str
    name: str
    internal: bool

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {"module": self.module, "name": self.name, "internal": self.internal}


def split_name(text: str) -> tuple[str, str]:
    """`gleam/list.map` → (`gleam/list`, `map`); a bare `map` → (``, `map`)."""
    module, dot, name = text.strip().rpartition(".")
    return (module, name) if dot else ("", text.strip())


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _module_match(column: str, module: str) -> str:
    """SQL: `column` is `module`, or ends with `/module` (`list` finds `gleam/list`)."""
    return (
        f"({column} = {_quote(module)} OR {column} LIKE {_quote('%/' + _like(module))} ESCAPE '\\')"
    )


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _pairs(column_module: str, column_name: str, targets: Sequence[Target]) -> str:
    """SQL: (module, name) is one of `targets`. Values are written in, not bound: DuckDB's
    Python binding imports pandas for a bound list, a large share of a warm query."""
    keys = ", ".join(_quote(t.qualified) for t in targets)
    return f"{column_module} || '.' || {column_name} IN ({keys})"


class GraphReader:
    """Queries over the graph tables of an open store (any connection-holding object)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        con: duckdb.DuckDBPyConnection = self.store.con  # a ThreadLocalStore: per thread
        return con

    def check(self) -> None:
        """One line to re-index when the index predates the graph or another version of it."""
        meta = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        if not meta.get("schema_version"):
            raise IndexEmptyError("the index holds nothing yet; run `gleambrctl index` first")
        have = meta.get("graph_version")
        if have is None:
            raise GraphMissingError(
                f"this index was built before the code graph existed; {REINDEX}"
            )
        if have != GRAPH_VERSION:
            raise GraphMissingError(
                f"this index holds code graph version {have}, this gleambrctl reads version "
                f"{GRAPH_VERSION}; {REINDEX}"
            )

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, list(params))
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    # ---------------------------------------------------------------- names

    def candidates(self, text: str) -> list[Target]:
        """Every node `text` may name: definitions first, then external targets."""
        module, name = split_name(text)
        where_def = "name = ?" + (f" AND {_module_match('module', module)}" if module else "")
        where_ref = "target_name = ?" + (
            f" AND {_module_match('target_module', module)}" if module else ""
        )
        internal = self.con.execute(
            f"SELECT DISTINCT module, name FROM graph_symbols WHERE {where_def} ORDER BY module",
            [name],
        ).fetchall()
        found = [Target(m, n, True) for m, n in internal]
        seen = {(t.module, t.name) for t in found}
        external = self.con.execute(
            f"SELECT DISTINCT target_module, target_name FROM graph_refs WHERE {where_ref} "
            "ORDER BY target_module",
            [name],
        ).fetchall()
        found += [Target(m, n, False) for m, n in external if (m, n) not in seen]
        exact = [t for t in found if t.module == module]
        # A module named in full is that module, whatever other modules end with its path.
        return exact if module and exact else found

    def resolve(self, text: str) -> Target:
        """The one node `text` names; an unknown or ambiguous name is one line with a hint."""
        self.check()
        found = self.candidates(text)
        if len(found) == 1:
            return found[0]
        if not found:
            raise NameNotFoundError(
                f"no definition or reference named {text!r}; {self._hint(text)}"
            )
        listed = ", ".join(t.qualified for t in found[:12])
        more = f" and {len(found) - 12} more" if len(found) > 12 else ""
        raise AmbiguousNameError(
            f"{text!r} names {len(found)} things: {listed}{more}; pass one of them qualified"
        )

    def _hint(self, text: str) -> str:
        module, name = split_name(text)
        known = [
            r[0]
            for r in self.con.execute(
                "SELECT DISTINCT name FROM graph_symbols UNION SELECT DISTINCT target_name "
                "FROM graph_refs"
            ).fetchall()
        ]
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
        if module and name in known:
            return f"{name!r} exists in other modules: try `refs {name}` to list them"
        if close:
            return "did you mean " + ", ".join(close) + "?"
        return "check the spelling, or run `gleambrctl index` if the code is new"

    # ---------------------------------------------------------------- queries

    def definitions(self, target: Target) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT path, line, col, kind, public, parent FROM graph_symbols "
            "WHERE module = ? AND name = ? ORDER BY path, line, col",
            [target.module, target.name],
        )

    def refs(self, text: str) -> dict[str, Any]:
        """The definition and every reference of a name, as `refs --json` prints them."""
        target = self.resolve(text)
        references = self._rows(
            "SELECT path, line, col, kind, module_from AS module, source_name AS source "
            "FROM graph_refs WHERE target_module = ? AND target_name = ? "
            "ORDER BY path, line, col",
            [target.module, target.name],
        )
        return {
            "name": text,
            "target": target.as_dict(),
            "definitions": self.definitions(target),
            "references": references,
        }

    def callers(self, text: str, depth: int = 1) -> dict[str, Any]:
        """Who calls a name, and (with depth) who calls those, breadth first."""
        return self._walk(text, depth, "callers")

    def callees(self, text: str, depth: int = 1) -> dict[str, Any]:
        """What a definition calls, and (with depth) what those call."""
        return self._walk(text, depth, "callees")

    def _walk(self, text: str, depth: int, way: str) -> dict[str, Any]:
        depth = max(1, min(depth, MAX_DEPTH))
        target = self.resolve(text)
        kinds = ", ".join(_quote(k) for k in CALL_KINDS)
        seen = {target.qualified}
        frontier = [target]
        found: list[dict[str, Any]] = []
        for level in range(1, depth + 1):
            if not frontier:
                break
            if way == "callers":
                sql = (
                    "SELECT module_from AS module, source_name AS name, target_module, "
                    "target_name, path, line, col, kind FROM graph_refs "
                    f"WHERE kind IN ({kinds}) AND "
                    f"{_pairs('target_module', 'target_name', frontier)} "
                    "ORDER BY module, name, path, line, col"
                )
            else:
                sql = (
                    "SELECT target_module AS module, target_name AS name, "
                    "module_from AS from_module, source_name AS from_name, path, line, col, "
                    f"kind FROM graph_refs WHERE kind IN ({kinds}) AND "
                    f"{_pairs('module_from', 'source_name', frontier)} "
                    "ORDER BY module, name, path, line, col"
                )
            # One entry per edge, (module, name, via): a definition reached from two
            # definitions of the level before is listed under each, with its own sites
            # (issue 30: keyed by the node alone, every site took the first one's label).
            groups: dict[tuple[str, str, str], dict[str, Any]] = {}
            for row in self._rows(sql):
                via = (
                    f"{row['target_module']}.{row['target_name']}"
                    if way == "callers"
                    else f"{row['from_module']}.{row['from_name']}"
                )
                key = (row["module"], row["name"], via)
                entry = groups.setdefault(
                    key,
                    {"module": key[0], "name": key[1], "depth": level, "via": via, "sites": []},
                )
                entry["sites"].append(
                    {
                        "path": row["path"],
                        "line": row["line"],
                        "col": row["col"],
                        "kind": row["kind"],
                    }
                )
            frontier = []
            internal = self._internal([Target(m, n, False) for m, n, _ in groups])
            reached: set[str] = set()
            for (module, name, _), entry in groups.items():
                qualified = f"{module}.{name}"
                entry["internal"] = (module, name) in internal
                if qualified in seen:  # listed at an earlier level, or the name asked about
                    continue
                found.append(entry)
                if name and qualified not in reached:  # module-level code has no callers
                    frontier.append(Target(module, name, entry["internal"]))
                reached.add(qualified)
            seen |= reached
        return {
            "name": text,
            "target": target.as_dict(),
            "definitions": self.definitions(target),
            "depth": depth,
            way: found,
        }

    def _internal(self, targets: Sequence[Target]) -> set[tuple[str, str]]:
        if not targets:
            return set()
        rows = self.con.execute(
            "SELECT DISTINCT module, name FROM graph_symbols WHERE "
            + _pairs("module", "name", targets)
        ).fetchall()
        return {(m, n) for m, n in rows}

    # ---------------------------------------------------------------- ask context

    def ready(self) -> bool:
        """Whether this index holds a graph this code reads (an older index holds none)."""
        try:
            self.check()
        except (GbrError, duckdb.Error):
            return False
        return True

    def used_by(self, spans: Sequence[tuple[str, int, int]]) -> list[tuple[int, Definition]]:
        """The internal definitions referenced inside each (path, first, last) line span.

        One row per span and definition, in the order of first reference; a constructor
        stands for its custom type. Empty on an index without the graph: `ask` goes on
        with its chunks alone.
        """
        if not spans or not self.ready():
            return []
        values = ", ".join(
            f"({i}, {_quote(path)}, {int(first)}, {int(last)})"
            for i, (path, first, last) in enumerate(spans)
        )
        rows = self.con.execute(
            f"""WITH spans(i, path, first, last) AS (VALUES {values}),
            used AS (
                SELECT sp.i, MIN(r.line * 10000 + r.col) AS pos, s.module, s.path, s.line,
                    CASE WHEN s.kind = 'constructor' THEN s.parent ELSE s.name END AS name
                FROM spans sp
                JOIN graph_refs r ON r.path = sp.path AND r.line BETWEEN sp.first AND sp.last
                JOIN graph_symbols s
                    ON s.module = r.target_module AND s.name = r.target_name
                GROUP BY ALL)
            SELECT u.i, MIN(u.pos) AS pos, u.module, u.name, c.kind, c.path, c.start_line,
                c.end_line, c.signature, c.doc
            FROM used u JOIN chunks c ON c.path = u.path AND c.name = u.name AND c.part = 0
                AND u.line BETWEEN c.start_line AND c.end_line
            GROUP BY ALL ORDER BY u.i, pos, u.module, u.name"""
        ).fetchall()
        return [
            (r[0], Definition(r[2], r[3], r[4], r[5], r[6], r[7], r[8] or "", r[9] or ""))
            for r in rows
        ]

    def reference_edges(self) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """Each (referring definition, internal definition it references) once, a
        constructor standing for its custom type and self-references left out; empty on an
        index without the graph. Feeds the search prior's centrality."""
        if not self.ready():
            return []
        rows = self.con.execute(
            """SELECT DISTINCT r.module_from, r.source_name, s.module,
                CASE WHEN s.kind = 'constructor' THEN s.parent ELSE s.name END AS name
            FROM graph_refs r JOIN graph_symbols s
                ON s.module = r.target_module AND s.name = r.target_name
            WHERE r.source_name <> ''"""
        ).fetchall()
        return [((a, b), (m, n)) for a, b, m, n in rows if (a, b) != (m, n)]

    def in_degrees(self) -> dict[tuple[str, str], int]:
        """How many other definitions reference each internal one."""
        return in_degrees(self.reference_edges())

    # ---------------------------------------------------------------- modules

    def modules(self) -> set[str]:
        """The modules of the indexed tree."""
        rows = self.con.execute(
            "SELECT DISTINCT module_from FROM graph_imports UNION "
            "SELECT DISTINCT module FROM graph_symbols UNION "
            "SELECT DISTINCT module FROM files WHERE module IS NOT NULL AND status <> 'failed'"
        ).fetchall()
        return {r[0] for r in rows}

    def find_module(self, text: str) -> str | None:
        """The module `text` names (`list` finds `gleam/list`), when exactly one matches."""
        text = text.strip()
        known = self.modules() | {
            r[0] for r in self.con.execute("SELECT DISTINCT module FROM graph_imports").fetchall()
        }
        if text in known:
            return text
        matches = sorted(m for m in known if m.endswith("/" + text))
        return matches[0] if len(matches) == 1 else None

    def imports(self, module: str | None = None) -> dict[str, Any]:
        """The import graph: every module's imports, or the neighbourhood of one module."""
        self.check()
        where = ""
        if module is not None:
            where = f"WHERE module_from = {_quote(module)} OR module = {_quote(module)}"
        edges = self._rows(
            f"SELECT DISTINCT module_from AS source, module AS target FROM graph_imports {where} "
            "ORDER BY source, target"
        )
        return _graph("imports", module, edges, self.modules())

    def neighbourhood(self, text: str, depth: int = 1) -> dict[str, Any]:
        """The call neighbourhood of a name: its callers and callees to `depth`, as a graph."""
        up = self.callers(text, depth)
        down = self.callees(text, depth)
        center = Target(**up["target"])
        edges = [
            {"source": f"{c['module']}.{c['name']}", "target": c["via"]} for c in up["callers"]
        ] + [{"source": c["via"], "target": f"{c['module']}.{c['name']}"} for c in down["callees"]]
        internal = {center.qualified} if center.internal else set()
        internal |= {
            f"{c['module']}.{c['name']}" for c in up["callers"] + down["callees"] if c["internal"]
        }
        return _graph("calls", center.qualified, edges, internal)


def _graph(
    kind: str, focus: str | None, edges: list[dict[str, Any]], internal: set[str]
) -> dict[str, Any]:
    names = sorted(
        {e["source"] for e in edges} | {e["target"] for e in edges} | ({focus} if focus else set())
    )
    return {
        "kind": kind,
        "focus": focus,
        "nodes": [{"id": n, "internal": n in internal} for n in names],
        "edges": edges,
    }
