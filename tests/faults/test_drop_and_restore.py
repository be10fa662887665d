"""Issue 32 item 14: a file dropped by a lowered `max_file_size`, then let back in.

main: a partial file (some definitions do not parse) whose intact definitions were in the
index was dropped, its chunks kept as stale; let back in, it was partial again, and those
stale chunks passed for a version that parsed, so they were kept, stale, where a fresh index
stores them fresh (3 chunks in the example's broken.gleam). Real CLI processes, real files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from tests.cli.test_interrupts import chunk_rows, file_rows
from tests.conftest import EXAMPLE, write_tree
from tests.faults.conftest import ctl

PARTIAL = "src/bookshelf/broken.gleam"  # 1 kB; lines 15-23 do not parse
FILES = (PARTIAL, "src/bookshelf/isbn.gleam", "gleam.toml")


def graph_rows(db: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            row
            for table in ("graph_symbols", "graph_imports", "graph_refs")
            for row in con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        ]
    finally:
        con.close()


def test_a_partial_file_dropped_and_let_back_in_equals_a_fresh_index(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "pkg", {f: (EXAMPLE / f).read_text() for f in FILES})
    home = tmp_path / "home"
    assert (root / PARTIAL).stat().st_size > 500

    def run(*args: str) -> None:
        done = ctl(*args, cwd=root, home=home)
        assert done.returncode == 0, done.stderr

    run("index", ".")
    run("settings", "max_file_size", "500")
    run("index", ".")  # both .gleam files are dropped
    run("settings", "max_file_size", "--unset")
    run("index", ".")
    fresh = tmp_path / "fresh" / "index.duckdb"
    run("index", ".", "--db", str(fresh))
    db = root / ".gbr" / "index.duckdb"
    cycled = chunk_rows(db)
    assert [row for row in cycled if row[0] == PARTIAL]  # its intact definitions are in
    assert cycled == chunk_rows(fresh)  # none of them stale
    assert file_rows(db) == file_rows(fresh)
    assert graph_rows(db) == graph_rows(fresh)
