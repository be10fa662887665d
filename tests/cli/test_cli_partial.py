"""A file that parses only in part, through the CLI as a user runs it: what is kept, what is said.

Real grammar, real model, real DuckDB; the package is written in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import run, run_json
from tests.core.test_chunker_partial import BROKEN_MIDDLE

NUMBERS = "src/pkg/numbers.gleam"


@pytest.fixture
def package(make_package: Any) -> Path:
    return make_package(
        {
            NUMBERS: BROKEN_MIDDLE,
            "src/pkg/greet.gleam": 'pub fn greet(name: String) -> String {\n  "Hi " <> name\n}\n',
        }
    )


def test_a_partial_file_is_indexed_in_part_and_reported(package: Path) -> None:
    summary = run_json("index", str(package))
    assert summary["files_indexed"] == 2 and summary["files_dropped"] == 0
    assert summary["files_partial"] == 1
    [item] = summary["partial"]
    assert item["path"] == NUMBERS and item["kind"] == "parse_partial"
    assert item["line"] == 12 and item["dropped_lines"] == [[10, 14]]

    # The event says where it broke and which lines were left out.
    events = [json.loads(line) for line in (package / ".gbr" / "events.jsonl").open()]
    [event] = [e for e in events if e["event"] == "parse_partial"]
    assert event["file"] == NUMBERS
    assert (event["line"], event["column"]) == (12, 17)
    assert event["excerpt"] == "let y = [1, 2,, 3]"
    assert event["dropped_lines"] == [[10, 14]]
    assert event["chunks"] == 3 and event["stale_chunks_kept"] == 0
    assert not [e for e in events if e["event"] == "parse_failed"]

    # The intact definitions are found; the broken one is not.
    hits = run_json("search", "a number", "--path", NUMBERS, "-k", "20", cwd=package)
    assert {h["name"] for h in hits["results"]} == {"pkg/numbers", "first", "last"}


def test_status_lists_the_partial_file(package: Path) -> None:
    run_json("index", str(package))
    status = run_json("status", cwd=package)
    assert status["files_partial"] == 1 and status["files_failed"] == 0
    assert status["files_ok"] == 1 and status["files"] == 2
    [item] = status["partial"]
    assert item["path"] == NUMBERS and item["error_kind"] == "parse_partial"
    assert item["chunks"] == 3 and item["stale_chunks"] == 0
    assert "lines 10-14 not indexed" in item["error"]
    assert status["dropped"] == []

    human = run("status", cwd=package)
    assert human.returncode == 0, human.stderr
    assert "1 dropped" not in human.stdout and "1 partial" in human.stdout
    line = next(x for x in human.stdout.splitlines() if NUMBERS in x)
    assert line.strip().startswith(f"partial {NUMBERS}: syntax error at line 12")


def test_strict_fails_on_a_partial_file_with_one_line(package: Path) -> None:
    result = run("index", str(package), "--strict")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "error: --strict: 0 files dropped, 1 only partly parsed; fix the files listed above, "
        "or index without --strict"
    ]
    assert f"partial {NUMBERS}" in result.stdout  # the summary names the file

    # Nothing changed: the file is not parsed again, and it is still partial.
    again = run("index", str(package), "--strict", "--json")
    assert again.returncode == 1
    summary = json.loads(again.stdout)
    assert summary["files_unchanged"] == 2 and summary["files_indexed"] == 0
    assert summary["files_partial"] == 1 and summary["partial"][0]["path"] == NUMBERS
    assert "lines 10-14 not indexed" in summary["partial"][0]["reason"]

    # Fixed, the same run passes: nothing is partial any more.
    (package / NUMBERS).write_text(BROKEN_MIDDLE.replace("2,, 3", "2, 3"))
    fixed = run("index", str(package), "--strict", "--json")
    assert fixed.returncode == 0, fixed.stderr
    summary = json.loads(fixed.stdout)
    assert summary["files_partial"] == 0 and summary["partial"] == []
    assert run_json("status", cwd=package)["partial"] == []


def test_strict_passes_when_every_file_parses(make_package: Any) -> None:
    root = make_package({"src/pkg/ok.gleam": "pub fn ok() -> Int {\n  1\n}\n"})
    result = run("index", str(root), "--strict")
    assert result.returncode == 0, result.stderr
