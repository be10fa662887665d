"""Issue 15, item 4: a failed commit is one line with its cause and fix, and no change is lost.

On main, `index` with a read-only `.gbr/` ended in a traceback, `TransactionException:
cannot rollback - no transaction is active` (the rollback after DuckDB had aborted the
commit hid the real "Operation not permitted"), and a daemon whose write failed dropped
the batch: the saved file never reached the index.

Root ignores chmod, so the folder is made immutable with `chattr +i`, which binds root.
"""

from __future__ import annotations

import json
from pathlib import Path

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from tests.daemon.conftest import (
    RunningDaemon,
    append_function,
    clean_env,
    start_daemon,
    wait_until,
)
from tests.faults.conftest import Immutable, ctl

BOUND = 120.0  # seconds for the daemon to do what it should do within a few


def test_index_into_a_read_only_folder_is_one_line_and_the_change_waits(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path, immutable: Immutable
) -> None:
    gbr = small_example / ".gbr"
    run_index(IndexOptions(root=small_example, db=gbr / "index.duckdb"), model)
    append_function(small_example, "src/bookshelf/isbn.gleam", "written_later")
    # As after an earlier CLI run: an events file that cannot be created is item 5's case.
    (gbr / "events.jsonl").touch()
    immutable.make(gbr)
    home = tmp_path / "home"
    done = ctl("index", ".", cwd=small_example, home=home)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: cannot write the index ")
    assert "Operation not permitted" in lines[0]
    assert f"make {gbr} writable, or pass --db" in lines[0]
    assert "Traceback" not in done.stderr and "rollback" not in done.stderr
    immutable.undo(gbr)
    again = ctl("index", ".", "--json", cwd=small_example, home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["files_indexed"] == 1  # the change was not lost


def wait_healthy(daemon: RunningDaemon) -> None:
    """Wait for /health to say ok; a timeout shows what it said last and the log's tail."""
    last: dict = {}

    def ok() -> bool:
        last.update(daemon.get("/health").json())
        return last["status"] == "ok"

    try:
        wait_until(ok, "health ok", BOUND)
    except AssertionError as exc:
        tail = daemon.log_text()[-3000:]
        raise AssertionError(f"{exc}; last /health: {last}; log tail:\n{tail}") from None


def indexer_part(daemon: RunningDaemon) -> dict | None:
    body = daemon.get("/health").json()
    parts = [p for p in body["degraded"] if p["component"] == "indexer"]
    return parts[0] if parts and body["status"] == "degraded" else None


def test_a_daemon_keeps_a_batch_whose_commit_failed_and_indexes_it_on_retry(
    small_example: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    """The drill fails the first commit that writes fresh.gleam, as a refused disk would."""
    fresh = "src/bookshelf/fresh.gleam"
    env = clean_env(tmp_path / "home", GBR_FAULTS=f"commit@file={fresh}")
    daemon = start_daemon(small_example, "--debounce-ms", "100", env=env)
    daemons.append(daemon)
    wait_until(lambda: daemon.status()["ready"], "the first pass", BOUND)
    (small_example / fresh).write_text("pub fn kept_through_a_failed_commit() -> Int {\n  7\n}\n")
    part = wait_until(lambda: indexer_part(daemon), "/health to show the kept batch", BOUND)
    assert "index writes are failing" in part["reason"] and "injected commit" in part["reason"]
    wait_until(
        lambda: "kept_through_a_failed_commit" in daemon.names("kept_through_a_failed_commit"),
        "the kept batch to be indexed on retry",
        BOUND,
    )
    wait_healthy(daemon)
    assert "index_batch_kept" in daemon.log_text() and "index_caught_up" in daemon.log_text()


def test_a_daemon_whose_folder_turns_read_only_indexes_the_save_once_it_is_writable(
    small_example: Path, tmp_path: Path, daemons: list[RunningDaemon], immutable: Immutable
) -> None:
    daemon = start_daemon(small_example, "--debounce-ms", "100", env=clean_env(tmp_path / "h"))
    daemons.append(daemon)
    wait_until(lambda: daemon.status()["ready"], "the first pass", BOUND)
    gbr = small_example / ".gbr"
    # A commit fails only when it must create the write-ahead log, which a checkpoint ends.
    wait_until(lambda: not (gbr / "index.duckdb.wal").exists(), "a checkpoint", BOUND)
    immutable.make(gbr)
    append_function(small_example, "src/bookshelf/config.gleam", "saved_while_read_only")
    part = wait_until(lambda: indexer_part(daemon), "/health to show the kept batch", BOUND)
    assert "Operation not permitted" in part["reason"]
    immutable.undo(gbr)
    wait_until(
        lambda: "saved_while_read_only" in daemon.names("saved_while_read_only"),
        "the save to be indexed once the folder is writable",
        BOUND,
    )
    wait_healthy(daemon)
