"""`search` and `status` keep working on the last complete index while `gleambrctl index`
runs without a daemon; a lock they cannot get past within a few seconds is one line with exit
code 75, never DuckDB's error. Real processes, a real package of generated files."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gbr.access.discovery import DaemonLock
from gbr.core.errors import IndexBusyError
from gbr.core.store.facade import Store
from gbr.core.store.snapshot import WriterLock, next_path
from tests.conftest import CTL, write_tree

WORDS = ["ledger", "invoice", "parcel", "harbour", "lantern", "meadow", "quarry", "saddle"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [CTL, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def one_line(text: str) -> str:
    return " ".join(text.split())


def generated(start: int, count: int) -> dict[str, str | bytes]:
    """`count` small modules, two documented functions each: quick to embed, many files."""
    files: dict[str, str | bytes] = {}
    for i in range(start, start + count):
        word = WORDS[i % len(WORDS)]
        files[f"src/gen/{word}_{i}.gleam"] = (
            f"/// Adds {i} to the {word} total.\n"
            f"pub fn add_{word}_{i}(x: Int) -> Int {{\n  x + {i}\n}}\n\n"
            f"/// Names the {word} number {i}.\n"
            f'pub fn name_{word}_{i}() -> String {{\n  "{word} {i}"\n}}\n'
        )
    return files


def status(cwd: Path, *db: str) -> dict:
    result = run("status", "--json", *db, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def hits(cwd: Path, query: str, *db: str) -> dict[str, float]:
    """name -> score: the generated functions tie in places, and ties may come in any order."""
    result = run("search", query, "-k", "8", "--json", *db, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return {h["name"]: round(h["score"], 4) for h in json.loads(result.stdout)["results"]}


def test_search_and_status_read_the_last_complete_index_during_a_run(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "pkg", {"gleam.toml": 'name = "pkg"\n', **generated(0, 4)})
    first = run("index", str(root), cwd=root)
    assert first.returncode == 0, first.stderr
    write_tree(root, generated(4, 196))

    writer = subprocess.Popen(
        [CTL, "index", str(root), "--json"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    reads_during_run = 0
    saw_the_copy = named_the_run = False
    problems: list[str] = []
    try:
        turn = 0
        while writer.poll() is None:
            saw_the_copy = saw_the_copy or next_path(root / ".gbr" / "index.duckdb").exists()
            command = ("status", "--json") if turn % 2 else ("search", "add to the total", "--json")
            turn += 1
            result = run(*command, cwd=root)
            finished_during_run = writer.poll() is None
            if result.returncode == 75:  # documented: one line naming the writer
                assert one_line(result.stderr).startswith("error: an index run (pid ")
                continue
            if result.returncode != 0:
                problems.append(f"{command[0]} exited {result.returncode}: {result.stderr}")
                continue
            if command[0] == "status":
                report = json.loads(result.stdout)
                named_the_run |= report.get("index_run_pid") == writer.pid
                files = report["files_ok"]
                # Either the old complete index or the new one, never a run half-done.
                if files not in (4, 200):
                    problems.append(f"status saw {files} files")
            reads_during_run += finished_during_run
        out, err = writer.communicate(timeout=600)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, err
    assert problems == []
    assert saw_the_copy and named_the_run and reads_during_run >= 2
    assert json.loads(out)["files_indexed"] == 196

    # The index the run left answers exactly as one built from nothing.
    fresh = ("--db", str(tmp_path / "fresh" / "index.duckdb"))
    built = run("index", str(root), *fresh, cwd=root)
    assert built.returncode == 0, built.stderr
    mine, theirs = status(root), status(root, *fresh)
    for key in ("files_ok", "files_failed", "chunks", "stale_chunks"):
        assert mine[key] == theirs[key]
    for query in ("Adds 43 to the harbour total", "name_lantern_13", "meadow number 21"):
        mine_hits, fresh_hits = hits(root, query), hits(root, query, *fresh)
        best = max(mine_hits.values())
        assert best == max(fresh_hits.values())
        assert {n for n, s in mine_hits.items() if s == best} == {
            n for n, s in fresh_hits.items() if s == best
        }
        both = mine_hits.keys() & fresh_hits.keys()
        assert len(both) >= 4 and all(mine_hits[n] == fresh_hits[n] for n in both)
    assert not next_path(root / ".gbr" / "index.duckdb").exists()


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "pkg", {"gleam.toml": 'name = "pkg"\n', **generated(0, 2)})
    result = run("index", str(root), cwd=root)
    assert result.returncode == 0, result.stderr
    return root


def test_a_reader_that_cannot_get_in_says_who_writes_in_one_line(indexed: Path) -> None:
    db = indexed / ".gbr" / "index.duckdb"
    with Store.open(db), WriterLock(db):  # a writer in place: this process holds the file
        started = time.monotonic()
        for command in (("search", "total"), ("status",)):
            result = run(*command, cwd=indexed)
            assert result.returncode == 75, result.stdout
            assert one_line(result.stderr) == (
                f"error: an index run (pid {os.getpid()}) is in progress on {db}; "
                "try again in a few seconds"
            )
            assert result.stdout == ""
        assert time.monotonic() - started >= 2 * 3.0  # each retried for READ_WAIT first
    assert run("status", cwd=indexed).returncode == 0  # and the index is intact


def test_a_second_writer_is_refused_in_one_line(indexed: Path) -> None:
    db = indexed / ".gbr" / "index.duckdb"
    write_tree(indexed, generated(2, 1))
    with WriterLock(db):
        result = run("index", str(indexed), cwd=indexed)
        assert result.returncode == 75
        assert one_line(result.stderr) == (
            f"error: an index run (pid {os.getpid()}) is in progress on {db}; "
            "try again when it finishes"
        )
        with pytest.raises(IndexBusyError, match="an index run"):
            DaemonLock(db).acquire()  # nor may a daemon start writing in place
    assert status(indexed)["files_ok"] == 2  # nothing was written meanwhile
    assert (
        json.loads(run("index", str(indexed), "--json", cwd=indexed).stdout)["files_indexed"] == 1
    )
