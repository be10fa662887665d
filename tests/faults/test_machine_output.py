"""What a machine reads on stdout stays machine-readable, whatever goes wrong beside it
(issue 32, item 6): a warning goes to stderr and to events.jsonl, never into `--json`.

Before: a damaged vector file printed `vector_file_damaged …` on stdout (structlog's
default, in a command that had not configured its events), so `search --json` and
`search -` were not JSON, and the event was in no events file.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import copy_small
from tests.daemon.conftest import CTL, clean_env


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("machine")
    root = copy_small(base / "small")
    done = subprocess.run(
        [CTL, "index", str(root)], env=clean_env(base / "home"), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    yield root


def damage_vector_file(root: Path) -> None:
    vectors = root / ".gbr" / "index.duckdb.vectors"
    assert vectors.is_file()
    data = bytearray(vectors.read_bytes())
    data[:8] = b"NOTGBRVE"  # same size, a header no reader takes
    vectors.write_bytes(bytes(data))


def damaged_events(root: Path) -> int:
    events = root / ".gbr" / "events.jsonl"
    lines = events.read_text().splitlines() if events.exists() else []
    return sum(json.loads(line)["event"] == "vector_file_damaged" for line in lines)


def search(
    root: Path, home: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "search", *args],
        cwd=root,
        env=clean_env(home),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_search_json_stays_json_when_the_vector_file_is_damaged(
    indexed: Path, tmp_path: Path
) -> None:
    damage_vector_file(indexed)
    before = damaged_events(indexed)
    done = search(indexed, tmp_path / "home", "check an isbn", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"]  # all of stdout is the one JSON object
    assert "vector_file_damaged" in done.stderr
    assert damaged_events(indexed) == before + 1


def test_search_lines_stay_json_lines_when_the_vector_file_is_damaged(
    indexed: Path, tmp_path: Path
) -> None:
    damage_vector_file(indexed)
    done = search(indexed, tmp_path / "home", "-", stdin="isbn\nmember\n")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["query"] for line in done.stdout.splitlines()] == ["isbn", "member"]
    assert "vector_file_damaged" in done.stderr
