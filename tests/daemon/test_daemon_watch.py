"""Edits on disk reach the running daemon's index: saves, syntax errors, deletions, crashes.

One daemon, started with `GBR_FAULTS=indexer@2`: its Indexer actor crashes on its second
message, which is the first batch of changes the watcher sends. The first test sees that
batch searchable anyway, after the supervisor restarted the actor and handed it the batch
again. Each test edits its own file, so they can share the daemon.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import copy_small
from tests.daemon.conftest import (
    RunningDaemon,
    append_function,
    clean_env,
    start_daemon,
    wait_until,
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    base = tmp_path_factory.mktemp("watch")
    root = copy_small(base / "small")
    env = clean_env(base / "home", GBR_FAULTS="indexer@2")
    running = start_daemon(root, "--debounce-ms", "100", env=env)
    running.wait_idle()
    yield running
    running.stop()


def test_a_saved_edit_becomes_searchable_even_through_an_indexer_crash(
    daemon: RunningDaemon,
) -> None:
    assert daemon.status()["restarts"] == 0
    health: list[int] = []
    stop = threading.Event()

    def keep_asking() -> None:
        with httpx.Client(base_url=daemon.url, timeout=5, trust_env=False) as client:
            while not stop.is_set():
                health.append(client.get("/health").status_code)

    prober = threading.Thread(target=keep_asking)
    prober.start()
    try:
        append_function(daemon.root, "src/bookshelf/config.gleam", "freshly_saved_helper")
        hits = wait_until(
            lambda: "freshly_saved_helper" in daemon.names("freshly_saved_helper"),
            "the new function to be searchable",
        )
        assert hits
    finally:
        stop.set()
        prober.join()
    assert health and set(health) == {200}  # HTTP kept answering through the crash
    status = daemon.wait_idle()
    assert status["restarts"] >= 1
    assert "actor_restarted" in daemon.log_text()
    metrics = daemon.get("/metrics").text
    assert 'gbr_actor_restarts_total{scope="daemon"} 1' in metrics


def test_a_syntax_error_keeps_the_last_good_chunks_marked_stale(daemon: RunningDaemon) -> None:
    member = daemon.root / "src/bookshelf/member.gleam"
    before = daemon.search("Member", mode="bm25", path="src/bookshelf/member.gleam", k=50)
    assert before["results"]
    # Nothing in it parses any more (a file that parses in part: test_daemon_partial).
    member.write_text("import gleam/string\n\npub fn half_written( {\n")

    def dropped() -> dict | None:
        status = daemon.status()
        return next((d for d in status["dropped"] if d["path"].endswith("member.gleam")), None)

    item = wait_until(dropped, "member.gleam to be reported as dropped")
    assert item["stale_chunks"] > 0 and "line" in item["error"]
    after = daemon.search("Member", mode="bm25", path="src/bookshelf/member.gleam", k=50)
    assert after == before  # the last good version is still what search finds
    status = daemon.status()
    assert status["files_failed"] == 1 and status["stale_chunks"] == item["stale_chunks"]
    events = [json.loads(line) for line in (daemon.db.parent / "events.jsonl").open()]
    failed = [e for e in events if e["event"] == "parse_failed"]
    assert failed and failed[-1]["file"] == "src/bookshelf/member.gleam"
    assert any(e["event"] == "chunks_kept_stale" for e in events)
    assert "gbr_parse_failures_total 1" in daemon.get("/metrics").text


def test_a_deleted_file_disappears_from_search(daemon: RunningDaemon) -> None:
    ffi = daemon.root / "src/bookshelf/ffi.gleam"
    names = {
        r["name"] for r in daemon.search("ffi", path="src/bookshelf/ffi.gleam", k=50)["results"]
    }
    assert names
    ffi.unlink()
    wait_until(
        lambda: not daemon.search("ffi", path="src/bookshelf/ffi.gleam", k=50)["results"],
        "ffi.gleam's chunks to be gone",
    )
    everything = daemon.search("ffi", k=50, mode="bm25")["results"]
    assert not [r for r in everything if r["path"] == "src/bookshelf/ffi.gleam"]
    assert all(d["path"] != "src/bookshelf/ffi.gleam" for d in daemon.status()["dropped"])


def test_a_new_file_in_a_new_folder_is_indexed(daemon: RunningDaemon) -> None:
    folder = daemon.root / "src/bookshelf/extra"
    folder.mkdir()
    (folder / "shelf.gleam").write_text(
        "/// Count the shelves.\npub fn shelf_count() -> Int {\n  7\n}\n"
    )
    wait_until(lambda: "shelf_count" in daemon.names("shelf_count"), "the new module")
    [hit] = [
        r
        for r in daemon.search("shelf_count", mode="bm25")["results"]
        if r["name"] == "shelf_count"
    ]
    assert hit["module"] == "bookshelf/extra/shelf"


def test_files_the_walker_ignores_stay_out(daemon: RunningDaemon) -> None:
    (daemon.root / ".gitignore").write_text("src/generated/\n")
    generated = daemon.root / "src/generated"
    generated.mkdir()
    (generated / "gen.gleam").write_text("pub fn generated_thing() -> Int {\n  1\n}\n")
    append_function(daemon.root, "test/isbn_test.gleam", "after_the_ignored_one")
    wait_until(
        lambda: "after_the_ignored_one" in daemon.names("after_the_ignored_one"),
        "the later change to be searchable",
    )
    daemon.wait_idle()
    assert "generated_thing" not in daemon.names("generated_thing")


def test_status_counts_what_the_watcher_did(daemon: RunningDaemon) -> None:
    status = daemon.wait_idle()
    assert status["watcher"] == "watching"
    assert status["last_batch"]["kind"] in ("changes", "full")
    assert Path(status["root"]) == daemon.root
