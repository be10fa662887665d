"""An interrupted `gleambrctl index` keeps what it finished, as its last line says (issue 32,
items 3 and 4). Real processes, signalled once telemetry says the phase is under way.

Before: SIGTERM during the vector fill printed "finished files are kept in the index", but
the staged copy holding the vectors done was never published and the next run deleted it;
SIGINT while a big file was chunked left no index at all, though the small files were
written; the 0.5 s grace ended the process before any commit. And a run that only filled
the missing vectors never asked the shared embed cache, so it embedded again what the
cache held.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli.test_interrupts import (
    LINE,
    coverage,
    file_rows,
    interrupt,
    small_files,
    start,
    wait_for_event,
)
from tests.daemon.conftest import CTL, clean_env

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import big_files  # the bench's generators: tests and bench index the same shapes

FILES = 300  # two chunks each: three pages of vectors to fill (256 a page)
PAGE = 256


def index_json(root: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [CTL, "index", str(root), "--max-file-size", "20MB", "--json", *args],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_interrupted(proc: subprocess.Popen[str], stderr: str, sig: str) -> None:
    assert proc.returncode == (130 if sig == "SIGINT" else 143)
    assert stderr.strip().splitlines() == [f"{LINE} ({sig})"]


def test_sigterm_during_the_vector_fill_keeps_the_vectors_done(
    make_package, tmp_path: Path
) -> None:
    root = make_package(small_files(FILES))
    db = root / ".gbr" / "index.duckdb"
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "embedding_progress", done=PAGE)
    _, stderr = interrupt(proc, signal.SIGTERM)
    assert_interrupted(proc, stderr, "SIGTERM")
    embedded, total = coverage(db)
    assert total == 2 * FILES
    assert embedded >= PAGE  # before: 0, the copy with the vectors was thrown away
    again = index_json(root, tmp_path)
    assert again["files_unchanged"] == FILES and again["files_indexed"] == 0
    assert again["chunks_embedded"] <= total - embedded
    assert coverage(db) == (total, total)


def test_sigint_while_a_big_file_is_chunked_keeps_the_files_written(
    make_package, tmp_path: Path
) -> None:
    # Walked in name order: the small files go first, the big one last, to the first
    # parser once its share of small files is done.
    root = make_package({**small_files(30), "src/zz_huge.gleam": big_files.many_functions()})
    db = root / ".gbr" / "index.duckdb"
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "large_file_chunking")
    time.sleep(2.0)  # the other parser's last small files reach the writer (milliseconds)
    _, stderr = interrupt(proc, signal.SIGINT)
    assert_interrupted(proc, stderr, "SIGINT")
    kept = dict(file_rows(db))  # before: no index at all
    assert {p for p, status in kept.items() if status == "ok"} == set(small_files(30))
    assert "src/zz_huge.gleam" not in kept


def test_a_run_that_fills_missing_vectors_takes_them_from_the_shared_cache(
    make_package, tmp_path: Path
) -> None:
    root = make_package(small_files(FILES))
    db = root / ".gbr" / "index.duckdb"
    # The shared cache learns every vector from an index of the same files elsewhere.
    index_json(root, tmp_path, "--db", str(tmp_path / "elsewhere" / "index.duckdb"))
    # A run without the cache is interrupted in its fill: vectors are missing here.
    proc = start(root, tmp_path, "--no-embed-cache")
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "index_searchable")
    _, stderr = interrupt(proc, signal.SIGTERM)
    assert_interrupted(proc, stderr, "SIGTERM")
    embedded, total = coverage(db)
    assert embedded < total
    again = index_json(root, tmp_path)
    assert again["files_unchanged"] == FILES
    assert again["chunks_embedded"] == 0  # before: every missing vector embedded again
    assert again["chunks_cached"] >= total - embedded
    assert coverage(db) == (total, total)
