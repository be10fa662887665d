"""A damaged index file, as real processes meet it: found, named in one line, rebuilt.

Before: 64 KB of garbage in the middle of index.duckdb made hybrid and BM25 search end in
a traceback (`Corrupt database file: computed checksum ... does not match`) while `index`
said "5 unchanged" and repaired nothing; a truncated or zeroed header gave one line with
no fix (and `index` stopped there).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Indexed
from tests.faults.files_faults_helpers import ctl, garbage_in_the_middle, index_json, one_error_line


@pytest.fixture(scope="module")
def built(indexed_small_template: Indexed) -> Path:
    """copy_small indexed once through the CLI; each test corrupts a copy of it."""
    return indexed_small_template.root


@pytest.fixture
def package(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    shutil.copytree(built, root, symlinks=True)
    return root


def truncated(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 3)


def zeroed_header(db: Path) -> None:
    with db.open("r+b") as handle:
        handle.write(b"\0" * 4096)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage_in_the_middle": garbage_in_the_middle,
    "truncated": truncated,
    "zeroed_header": zeroed_header,
}
SAID = {
    "garbage_in_the_middle": "checksum mismatch in block at location",
    "truncated": "the file is shorter than it should be",
    "zeroed_header": "not a valid DuckDB database file",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_index_is_one_line_everywhere_and_index_rebuilds_it(
    package: Path, tmp_path: Path, damage: str
) -> None:
    db = package / ".gbr" / "index.duckdb"
    DAMAGE[damage](db)
    damaged_bytes = db.read_bytes()
    home = tmp_path / "home"
    fix = f"run `gleambrctl index --rebuild {package}`"

    commands = [
        ("search", "parse an isbn"),
        ("search", "isbn", "--mode", "bm25"),
        ("ask", "how is an isbn checked?", "--dry-run"),
    ]
    if damage != "garbage_in_the_middle":  # status reads no chunk text, so it may not notice
        commands.append(("status",))
    for args in commands:
        line = one_error_line(ctl(*args, cwd=package, home=home))
        assert f"the index {db} is damaged ({SAID[damage]}" in line, args
        assert fix in line, args

    summary, stderr = index_json(package, home=home)

    [aside] = list(db.parent.glob("index.duckdb.corrupt-*"))
    assert aside.read_bytes() == damaged_bytes  # kept as it was, for a post-mortem
    assert f"could not be read ({SAID[damage]}" in stderr and aside.name in stderr
    assert "Traceback" not in stderr
    assert summary["files_indexed"] == 5 and summary["files_unchanged"] == 0
    found = ctl("search", "isbn", "--mode", "bm25", "--json", cwd=package, home=home)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"]


def test_rebuild_recreates_a_healthy_index_and_removes_the_old_file_once_done(
    package: Path, tmp_path: Path
) -> None:
    db = package / ".gbr" / "index.duckdb"

    summary, stderr = index_json(package, "--rebuild", home=tmp_path / "home")

    assert "searches use the old one until the new one is complete" in stderr
    assert list(db.parent.glob("index.duckdb.old-*")) == []  # nothing set aside
    assert summary["files_indexed"] == 5 and summary["files_unchanged"] == 0
    again, _ = index_json(package, home=tmp_path / "home")
    assert again["files_unchanged"] == 5  # the new file is the index now
