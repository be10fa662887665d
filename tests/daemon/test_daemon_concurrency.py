"""The daemon under load: 20 clients search while a writer edits, adds and deletes files.

What can go wrong here is concurrency, not speed: a search that lands while a batch is
written, while the full-text index is rebuilt or while the vectors are swapped must still
get a well-formed 200, and an edit saved while the previous batch is still being indexed
must not be lost. So the test counts every non-200, malformed body and client exception
(there must be none), then checks that each function the writer added is findable, that
the deleted file is gone, and that the daemon's incremental index holds exactly what a
from-scratch index of the final tree holds. Nothing asserts on timing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.facade import Store
from tests.conftest import copy_small
from tests.daemon.conftest import (
    HIT_KEYS,
    RunningDaemon,
    append_function,
    clean_env,
    start_daemon,
    wait_until,
)

CLIENTS = 20
LOAD_DEADLINE = 90.0  # generous: 20 clients share 2 cores with the indexer
EDITED = (
    "src/bookshelf/config.gleam",
    "src/bookshelf/isbn.gleam",
    "src/bookshelf/member.gleam",
    "test/isbn_test.gleam",
)
DELETED = "src/bookshelf/ffi.gleam"
CREATED = "src/bookshelf/ledger.gleam"
QUERIES = (
    ("check that an ISBN is valid", "hybrid"),
    ("validate_isbn13", "bm25"),
    ("default loan period in days", "dense"),
    ("member with unpaid fines", "hybrid"),
    ("random identifier", "hybrid"),  # ffi.gleam's answer, until it is deleted
    ("ledger_balance", "bm25"),  # nothing, until ledger.gleam appears
    ("now_millis", "hybrid"),
)


@dataclass
class Load:
    """What the clients saw, shared by their threads (list appends are atomic)."""

    problems: list[str] = field(default_factory=list)
    searches: list[int] = field(default_factory=lambda: [0] * CLIENTS)
    during_writes: list[int] = field(default_factory=lambda: [0] * CLIENTS)


def body_problem(body: Any, query: str, mode: str, k: int) -> str | None:
    """Why a /search body is malformed, or None when it is a proper `search --json` object."""
    if not isinstance(body, dict) or set(body) != {"query", "mode", "results", "embedded"}:
        return f"unexpected body shape {str(body)[:200]}"
    if set(body["embedded"]) != {"chunks", "of"}:
        return f"unexpected embedded shape {body['embedded']}"
    if body["query"] != query or body["mode"] != mode:
        return f"answer to another request: {body['query']!r} {body['mode']!r}"
    results = body["results"]
    if not isinstance(results, list) or len(results) > k:
        return f"results is not a list of at most {k}: {str(results)[:200]}"
    for rank, hit in enumerate(results, start=1):
        if not isinstance(hit, dict) or set(hit) != HIT_KEYS:
            return f"malformed hit {str(hit)[:200]}"
        if hit["rank"] != rank or not hit["path"].endswith(".gleam") or not hit["name"]:
            return f"inconsistent hit {str(hit)[:200]}"
        if not 1 <= hit["start_line"] <= hit["end_line"] or not hit["text"]:
            return f"hit with bad lines or no text {str(hit)[:200]}"
    return None


def search_loop(
    daemon: RunningDaemon,
    me: int,
    load: Load,
    stop: threading.Event,
    writing: threading.Event,
) -> None:
    """One client, its own connection pool, searching until told to stop."""
    queries = itertools.cycle(QUERIES[me % len(QUERIES) :] + QUERIES[: me % len(QUERIES)])
    with daemon.http() as client:
        while not stop.is_set():
            query, mode = next(queries)
            k = 5 + me % 6
            # Sent while files change: on a loaded machine the answer may come after.
            during = writing.is_set()
            try:
                response = client.post("/search", json={"query": query, "k": k, "mode": mode})
            except Exception as exc:  # a reset or timeout is a failure like a 5xx
                load.problems.append(f"client {me}: {type(exc).__name__}: {exc}")
                continue
            if response.status_code != 200:
                load.problems.append(f"client {me}: {response.status_code} {response.text[:200]}")
                continue
            try:
                problem = body_problem(response.json(), query, mode, k)
            except ValueError as exc:
                problem = f"not JSON: {exc}"
            if problem is not None:
                load.problems.append(f"client {me}: {problem}")
            load.searches[me] += 1
            if during:
                load.during_writes[me] += 1


def status_loop(daemon: RunningDaemon, load: Load, stop: threading.Event) -> None:
    """/status and /metrics read every table while batches are written; they must answer too."""
    with daemon.http() as client:
        while not stop.is_set():
            for path in ("/status", "/metrics"):
                try:
                    response = client.get(path)
                except Exception as exc:
                    load.problems.append(f"{path}: {type(exc).__name__}: {exc}")
                    continue
                if response.status_code != 200:
                    load.problems.append(f"{path}: {response.status_code} {response.text[:200]}")
            stop.wait(0.1)


def edit_files(root: Path, added: dict[str, str], pause: Callable[[float], object]) -> None:
    """Saves one after another: some land together in one batch, some mid-batch."""
    for round_no in range(2):
        for i, rel in enumerate(EDITED):
            name = f"load_added_r{round_no}_m{i}"
            append_function(root, rel, name, body=str(100 * round_no + i))
            added[name] = rel
            pause(0.15 if i % 2 else 0.0)  # pairs of saves share a debounce window
        if round_no == 0:
            (root / CREATED).write_text(
                "/// What a member owes, in cents.\n"
                "pub fn ledger_balance(member_id: Int) -> Int {\n  member_id * 0\n}\n",
                encoding="utf-8",
            )
            added["ledger_balance"] = CREATED
        if round_no == 1:
            (root / DELETED).unlink()
        pause(0.3)
    append_function(root, CREATED, "ledger_append_after_create", body="7")
    added["ledger_append_after_create"] = CREATED


def chunk_rows(db: Path) -> list[tuple[Any, ...]]:
    with Store.open(db) as store:  # read-write, like the pipeline connections still closing
        return store.con.execute(
            "SELECT path, module, kind, name, part, start_line, end_line, stale, text "
            "FROM chunks ORDER BY ALL"
        ).fetchall()


@pytest.fixture
def daemon(tmp_path: Path, daemons: list[RunningDaemon]) -> Iterator[RunningDaemon]:
    root = copy_small(tmp_path / "small")
    running = start_daemon(root, "--debounce-ms", "100", env=clean_env(tmp_path / "home"))
    daemons.append(running)
    running.wait_idle()
    yield running


def test_searches_under_concurrent_edits_all_succeed_and_no_update_is_lost(
    daemon: RunningDaemon, model: OnnxEmbedder, tmp_path: Path
) -> None:
    root = daemon.root
    deleted_names = {
        r["name"] for r in daemon.search("ffi", path=DELETED, k=50, mode="bm25")["results"]
    }
    assert "now_millis" in deleted_names

    load = Load()
    stop, writing = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=search_loop, args=(daemon, i, load, stop, writing))
        for i in range(CLIENTS)
    ]
    threads.append(threading.Thread(target=status_loop, args=(daemon, load, stop)))
    added: dict[str, str] = {}
    writing.set()
    for thread in threads:
        thread.start()
    try:
        edit_files(root, added, stop.wait)
        for name, rel in added.items():
            wait_until(
                lambda name=name, rel=rel: any(
                    r["name"] == name and r["path"] == rel
                    for r in daemon.search(name, mode="bm25", k=10)["results"]
                ),
                f"{name} to be searchable while the clients search",
                timeout=LOAD_DEADLINE,
            )
        wait_until(
            lambda: not daemon.search("ffi", path=DELETED, k=50)["results"],
            f"{DELETED} to leave the index",
            timeout=LOAD_DEADLINE,
        )
    finally:
        writing.clear()
        stop.set()
        for thread in threads:
            thread.join(60)

    assert load.problems == []
    assert all(n > 0 for n in load.searches), load.searches  # every client got answers
    # Every client searched while files were being changed and re-indexed.
    assert all(n > 0 for n in load.during_writes), load.during_writes

    status = daemon.wait_idle()
    # No lost update: every added function is there, in its file, once.
    for name, rel in added.items():
        hits = [r for r in daemon.search(name, mode="bm25", k=10)["results"] if r["name"] == name]
        assert [h["path"] for h in hits] == [rel], name
    # The deleted file's chunks are gone from every mode.
    for name in deleted_names:
        for mode in ("bm25", "hybrid"):
            hits = daemon.search(name, mode=mode, k=20)["results"]
            assert all(h["path"] != DELETED for h in hits), (name, mode)

    # /status agrees with the disk...
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.gleam"))
    assert DELETED not in on_disk and CREATED in on_disk
    assert status["files"] == status["files_ok"] == len(on_disk)
    assert status["files_failed"] == 0 and status["stale_chunks"] == 0
    assert status["dropped"] == []
    assert status["restarts"] == 0 and status["dead_letters"] == 0
    # ...and with a from-scratch index of the same tree, chunk for chunk.
    fresh = run_index(IndexOptions(root=root, db=tmp_path / "fresh.duckdb"), model)
    assert fresh.files_dropped == 0
    assert status["chunks"] == fresh.chunks
    assert daemon.stop() == 0
    incremental = chunk_rows(daemon.db)
    assert incremental and incremental == chunk_rows(tmp_path / "fresh.duckdb")
