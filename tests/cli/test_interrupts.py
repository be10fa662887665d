"""Ctrl-C and SIGTERM stop `gleambrctl index` quickly in any stage, and lose nothing.

Real processes: the signal is sent once telemetry says the stage is under way (never after
a bare sleep), and the bound on the exit is generous because the machine is shared; the
bench (bench/big_files.py) measures the real figure.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from gbr.core.parse.oversize import MAX_CHUNK_CHARS
from tests.conftest import CTL, invoke
from tests.daemon.conftest import clean_env

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import big_files  # the bench's generators: tests and bench index the same shapes

EXIT_BOUND = 10.0  # seconds from the signal to the exit; the bench measures the real one
STAGE_BOUND = 300.0  # seconds for the run to reach the stage under test on a busy machine
LINE = "interrupted; finished files are kept in the index"


def small_files(count: int) -> dict[str, str]:
    return {
        f"src/app/mod_{i}.gleam": (
            f"/// Adds {i} to a number.\npub fn add_{i}(x: Int) -> Int {{\n  x + {i}\n}}\n\n"
            f"/// Names the {i}th shelf.\npub fn shelf_{i}() -> String {{\n"
            f'  "shelf number {i}"\n}}\n'
        )
        for i in range(count)
    }


def start(root: Path, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CTL, "index", str(root), "--max-file-size", "20MB", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path / "home"),
    )


def wait_for_event(proc: subprocess.Popen[str], events: Path, name: str, **fields: Any) -> None:
    """Poll the run's events.jsonl until `name` (with at least these fields) appears."""
    deadline = time.monotonic() + STAGE_BOUND
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended before {name}: {proc.communicate()}"
        if events.exists():
            for line in events.read_text(encoding="utf-8").splitlines():
                event = json.loads(line)
                if event.get("event") == name and all(
                    event.get(k, 0) >= v for k, v in fields.items()
                ):
                    return
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"no {name} event within {STAGE_BOUND:g} s")


def interrupt(proc: subprocess.Popen[str], signum: int) -> tuple[float, str]:
    """Send the signal; the seconds until the process ended, and its stderr."""
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run was still going 60 s after the signal")
    return time.monotonic() - sent, stderr


def assert_stopped(seconds: float, stderr: str, proc: subprocess.Popen[str], sig: str) -> None:
    assert seconds < EXIT_BOUND, f"took {seconds:.1f} s to exit"
    assert proc.returncode == (130 if sig == "SIGINT" else 143)
    assert stderr.strip().splitlines() == [f"{LINE} ({sig})"]


def chunk_rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []  # a first run builds a staged copy: cut short, it leaves no index yet
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT path, module, kind, name, part, parts, start_line, end_line, stale, text, "
            "embed_hash FROM chunks ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def coverage(db: Path) -> tuple[int, int]:
    """(chunks with a vector, all chunks)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(embedding), count(*) FROM chunks").fetchall()[0]
        return int(row[0]), int(row[1])
    finally:
        con.close()


def file_rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT path, status FROM files ORDER BY ALL").fetchall()
    finally:
        con.close()


def assert_rerun_matches_fresh(root: Path, tmp_path: Path) -> None:
    """A second run finishes the job: the same chunks as one fresh, uninterrupted run."""
    fresh_db = tmp_path / "fresh" / "index.duckdb"
    for extra in ((), ("--db", str(fresh_db))):
        done = subprocess.run(
            [CTL, "index", str(root), "--max-file-size", "20MB", "--json", *extra],
            capture_output=True,
            text=True,
            env=clean_env(tmp_path / "home"),
            timeout=900,
        )
        assert done.returncode == 0, done.stderr
    db = root / ".gbr" / "index.duckdb"
    assert chunk_rows(db) == chunk_rows(fresh_db)
    assert file_rows(db) == file_rows(fresh_db)


def test_sigint_while_a_10mb_file_is_chunked_stops_at_once(make_package, tmp_path: Path) -> None:
    root = make_package({"src/app/huge.gleam": big_files.many_functions()})
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "large_file_chunking")
    seconds, stderr = interrupt(proc, signal.SIGINT)
    assert_stopped(seconds, stderr, proc, "SIGINT")
    db = root / ".gbr" / "index.duckdb"
    assert chunk_rows(db) == []  # the file was not finished: nothing half-written of it
    assert ("src/app/huge.gleam", "ok") not in file_rows(db)


@pytest.mark.slow  # embeds about 900 chunks, twice over
def test_sigint_while_a_big_batch_is_embedded_stops_at_once_and_keeps_the_chunks(
    make_package, tmp_path: Path
) -> None:
    # About 800 functions: the signal lands after the first page of 256 vectors, with some
    # 550 still to come (4 s on a quiet machine), and the rerun embeds only those.
    root = make_package({"src/app/big.gleam": big_files.many_functions(240_000)})
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "embedding_progress", done=256)
    seconds, stderr = interrupt(proc, signal.SIGINT)
    assert_stopped(seconds, stderr, proc, "SIGINT")
    # The chunks were written (and BM25-indexed) before the vectors: all are kept, some
    # without a vector, and a rerun embeds those and matches a fresh run.
    db = root / ".gbr" / "index.duckdb"
    kept = chunk_rows(db)
    embedded, total = coverage(db)
    assert kept and total == len(kept) and embedded < total
    assert_rerun_matches_fresh(root, tmp_path)
    embedded, total = coverage(db)
    assert embedded == total == len(kept)


def test_sigterm_mid_run_over_many_files_stops_and_a_rerun_finishes_the_job(
    make_package, tmp_path: Path
) -> None:
    # Files are parsed and written first (400 in 0.7 s on a quiet machine) and their
    # vectors fill in after: the signal lands once the chunks are searchable, with about
    # 600 vectors (4 s on a quiet machine) still to come. An index_progress trigger came
    # only at the end of a quick run, and the signal then met the interpreter's exit.
    root = make_package(small_files(300))
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "index_searchable")
    seconds, stderr = interrupt(proc, signal.SIGTERM)
    assert_stopped(seconds, stderr, proc, "SIGTERM")
    assert_rerun_matches_fresh(root, tmp_path)


def test_sigint_with_a_huge_constant_in_flight_and_a_rerun_finishes_the_job(
    make_package, tmp_path: Path
) -> None:
    root = make_package(
        {"src/app/table.gleam": big_files.big_constant(1_200_000), **small_files(30)}
    )
    proc = start(root, tmp_path)
    wait_for_event(proc, root / ".gbr" / "events.jsonl", "large_file_chunking")
    seconds, stderr = interrupt(proc, signal.SIGINT)
    assert_stopped(seconds, stderr, proc, "SIGINT")
    assert_rerun_matches_fresh(root, tmp_path)


def test_a_big_file_is_skipped_by_default_and_indexed_under_the_chunk_cap_when_allowed(
    make_package, tmp_path: Path
) -> None:
    table = big_files.big_constant(1_200_000)
    root = make_package({"src/app/table.gleam": table, **small_files(2)})
    env = clean_env(tmp_path / "home")
    default = subprocess.run(
        [CTL, "index", str(root)], capture_output=True, text=True, env=env, timeout=900
    )
    assert default.returncode == 0, default.stderr
    status = invoke("status", "--json", cwd=root, env={"GBR_HOME": env["GBR_HOME"]})
    dropped = {d["path"]: d["error"] for d in json.loads(status.stdout)["dropped"]}
    assert "over the 1.0 MB limit" in dropped["src/app/table.gleam"]
    assert "--max-file-size" in dropped["src/app/table.gleam"]

    allowed = subprocess.run(
        [CTL, "index", str(root), "--max-file-size", "2MB"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert allowed.returncode == 0, allowed.stderr
    rows = [r for r in chunk_rows(root / ".gbr" / "index.duckdb") if r[0] == "src/app/table.gleam"]
    assert len(rows) > 1
    assert max(len(r[9]) for r in rows) <= MAX_CHUNK_CHARS
    parts = sorted(rows, key=lambda r: r[4])
    assert [r[4] for r in parts] == list(range(len(parts)))  # part index marks each window
    # Windows of whole lines, in order, rebuild the constant exactly.
    assert "\n".join(r[9] for r in parts) == table.rstrip("\n")
