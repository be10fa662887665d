"""Check that every target of a query file is a chunk in an index of its corpus.

A hand-written dev query is only useful if its answer exists: a typo in a name, a
file the grammar drops, or a target under `test/` would silently make a query
unanswerable and skew every figure measured on it. Index the corpus first with the
real tool, then run:

    .venv/bin/gleambrctl index CORPUS --db DB --json
    .venv/bin/python bench/check_queries.py CORPUS QUERIES.jsonl... [--db DB]

Exits 1 listing each (query id, file, name) that is not a chunk, or that is not
library code; 0 when all targets resolve.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.evaluation import QUERY_KINDS, Query, load_queries  # noqa: E402
from gbr.core.errors import GbrError  # noqa: E402

NON_LIBRARY = ("test/", "examples/", "dev/")


def load_chunks(db: Path) -> set[tuple[str, str]]:
    """(path, name) of every chunk in the index at `db`."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT DISTINCT path, name FROM chunks").fetchall()
    return {(path, name) for path, name in rows}


def problems(queries: list[Query], chunks: set[tuple[str, str]]) -> list[str]:
    """One line per bad query or target; empty when the queries are sound."""
    out: list[str] = []
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            out.append(f"{q.id}: duplicate id")
        seen.add(q.id)
        if q.kind not in QUERY_KINDS:
            out.append(f"{q.id}: kind {q.kind!r} is not one of {', '.join(QUERY_KINDS)}")
        if not q.query.strip():
            out.append(f"{q.id}: empty query")
        if not q.targets:
            out.append(f"{q.id}: no targets")
        for t in q.targets:
            if t.file.startswith(NON_LIBRARY):
                out.append(f"{q.id}: {t.file}:{t.name} is not library code")
            if (t.file, t.name) not in chunks:
                out.append(f"{q.id}: {t.file}:{t.name} is not a chunk")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the indexed repository folder")
    parser.add_argument("queries", type=Path, nargs="+", help="query .jsonl files")
    parser.add_argument(
        "--db",
        type=Path,
        help="index of the corpus (default: /tmp/devset/<folder>.duckdb)",
    )
    args = parser.parse_args(argv)
    db = args.db or Path("/tmp/devset") / f"{args.corpus.name}.duckdb"
    if not db.exists():
        print(
            f"no index at {db}; run: gleambrctl index {args.corpus} --db {db} --json",
            file=sys.stderr,
        )
        return 2
    chunks = load_chunks(db)
    bad: list[str] = []
    count = 0
    for path in args.queries:
        try:
            queries = load_queries(path)
        except (GbrError, OSError) as exc:
            print(exc, file=sys.stderr)
            return 2
        count += len(queries)
        bad += [f"{path.name}: {p}" for p in problems(queries, chunks)]
    for line in bad:
        print(line)
    print(f"{count} queries, {len(bad)} problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
