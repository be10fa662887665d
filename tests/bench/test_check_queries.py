"""bench/check_queries.py finds dev-query targets that are not library chunks of a real index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.check_queries import main
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder

LIB = """/// Open the front door with a key.
pub fn unlock_door(key: String) -> Bool {
  key == "brass"
}

pub type LockError {
  WrongKey
}
"""
TEST = """pub fn unlock_door_test() {
  Nil
}
"""


def query(qid: str, file: str, name: str, kind: str = "nl") -> dict:
    return {
        "id": qid,
        "query": "open the door",
        "kind": kind,
        "targets": [{"file": file, "name": name}],
    }


@pytest.fixture
def indexed(make_package, model: OnnxEmbedder, tmp_path: Path) -> tuple[Path, Path]:
    root = make_package({"src/house.gleam": LIB, "test/house_test.gleam": TEST}, name="house")
    db = tmp_path / "house.duckdb"
    run_index(IndexOptions(root=root, db=db), model)
    return root, db


def write(path: Path, queries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in queries))
    return path


def test_all_targets_resolve(indexed, tmp_path: Path, capsys) -> None:
    root, db = indexed
    good = write(
        tmp_path / "good.jsonl",
        [
            query("h-1", "src/house.gleam", "unlock_door"),
            query("h-2", "src/house.gleam", "LockError", "type"),
        ],
    )
    assert main([str(root), str(good), "--db", str(db)]) == 0
    assert "2 queries, 0 problems" in capsys.readouterr().err


def test_lists_every_bad_target(indexed, tmp_path: Path, capsys) -> None:
    root, db = indexed
    bad = write(
        tmp_path / "bad.jsonl",
        [
            query("h-1", "src/house.gleam", "unlock_dor"),  # typo: no such chunk
            query("h-2", "test/house_test.gleam", "unlock_door_test"),  # a chunk, but a test
            query("h-2", "src/house.gleam", "unlock_door", "semantic"),  # duplicate id, bad kind
        ],
    )
    assert main([str(root), str(bad), "--db", str(db)]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert "bad.jsonl: h-1: src/house.gleam:unlock_dor is not a chunk" in lines
    assert "bad.jsonl: h-2: test/house_test.gleam:unlock_door_test is not library code" in lines
    assert "bad.jsonl: h-2: duplicate id" in lines
    assert any("kind 'semantic'" in line for line in lines)
    assert len(lines) == 4 and "3 queries, 4 problems" in out.err


def test_missing_index_says_how_to_build_it(tmp_path: Path, capsys) -> None:
    q = write(tmp_path / "q.jsonl", [query("h-1", "src/house.gleam", "unlock_door")])
    assert main([str(tmp_path), str(q), "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "gleambrctl index" in capsys.readouterr().err


def test_malformed_query_line_is_one_message(indexed, tmp_path: Path, capsys) -> None:
    root, db = indexed
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x", "query": "no targets key"}\n')
    assert main([str(root), str(broken), "--db", str(db)]) == 2
    assert "broken.jsonl:1: not a query line" in capsys.readouterr().err
