"""Issue 32, item 12: readers keep the old index, whole, while `index --rebuild` runs.

Before: `--rebuild` moved the index aside first and built the new one in its place, so a
`search` during the run said "no index found" (exit 2), then saw the new index with 0 % of
its vectors, while the complete old index sat aside unused; an interrupted rebuild left
no index at all or a partial one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CTL
from tests.daemon.conftest import clean_env
from tests.faults.conftest import WIDE

BOUND = 600.0  # seconds: the test's bound on a rebuild of the example


def _ctl(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, *args],
        cwd=cwd,
        env=clean_env(home, COLUMNS=WIDE),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rebuild(root: Path, home: Path) -> subprocess.Popen[str]:
    # A fresh home: the shared embed cache is empty, so the rebuild embeds every chunk.
    return subprocess.Popen(
        [CTL, "index", str(root), "--rebuild", "--json"],
        env=clean_env(home, COLUMNS=WIDE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _whole(root: Path, home: Path, chunks: int) -> None:
    """What a reader sees now is a complete index of `chunks` chunks: every one embedded,
    and a search finds its hits."""
    status = _ctl("status", "--json", cwd=root, home=home)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["embedded"] == {"chunks": chunks, "of": chunks}, report["embedded"]
    found = _ctl("search", "parse an isbn", "--json", cwd=root, home=home)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"]


@dataclass(frozen=True)
class Package:
    root: Path
    home: Path
    db: Path
    chunks: int  # in its index


@pytest.fixture
def package(indexed_example: Path, tmp_path: Path) -> Package:
    """The example, indexed; a home of its own (an empty shared embed cache)."""
    home = tmp_path / "home"
    status = _ctl("status", "--json", cwd=indexed_example, home=home)
    chunks = json.loads(status.stdout)["chunks"]
    return Package(indexed_example, home, indexed_example / ".gbr" / "index.duckdb", chunks)


def test_searches_during_a_rebuild_see_the_old_index_whole(package: Package) -> None:
    root, home, db, chunks = package.root, package.home, package.db, package.chunks

    rebuild = _rebuild(root, home)
    seen_during = 0
    deadline = time.monotonic() + BOUND
    while rebuild.poll() is None and time.monotonic() < deadline:
        _whole(root, home, chunks)
        if rebuild.poll() is None:
            seen_during += 1
    out, err = rebuild.communicate(timeout=BOUND)

    assert rebuild.returncode == 0, err
    assert seen_during >= 2, "the rebuild ended before readers could look at it"
    summary = json.loads(out)
    assert summary["files_indexed"] == summary["files_seen"] and summary["files_unchanged"] == 0
    assert "Traceback" not in err
    _whole(root, home, summary["chunks_in_index"] or chunks)
    assert sorted(p.name for p in db.parent.glob("index.duckdb.*")) == [
        "index.duckdb.lock",
        "index.duckdb.vectors",
    ]  # nothing set aside, nothing staged left


def test_an_interrupted_rebuild_leaves_the_old_index_as_it_was(package: Package) -> None:
    root, home, db, chunks = package.root, package.home, package.db, package.chunks
    before = db.read_bytes()

    rebuild = _rebuild(root, home)
    next_file = db.with_name("index.duckdb.next")
    deadline = time.monotonic() + BOUND
    while not next_file.exists() and rebuild.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)  # well into the run: files written, vectors being embedded
    assert rebuild.poll() is None, "the rebuild ended before it could be interrupted"
    rebuild.send_signal(signal.SIGINT)
    _, err = rebuild.communicate(timeout=60)

    assert rebuild.returncode == 130, err
    assert db.read_bytes() == before  # the old index, untouched
    _whole(root, home, chunks)
    assert not next_file.exists()
    again = _ctl("index", str(root), "--json", cwd=root, home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["files_indexed"] == 0  # nothing to catch up on
