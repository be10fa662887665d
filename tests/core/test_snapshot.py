"""The staged copy an index run writes, its commit, and the no-change pre-check."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gbr.actors import stages
from gbr.actors.pipeline import IndexOptions, _index_meta, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import IndexBusyError
from gbr.core.parse import walker
from gbr.core.parse.walker import FoundFile, WalkBegun, WalkOptions
from gbr.core.records import IndexSummary
from gbr.core.store.facade import Store
from gbr.core.store.snapshot import (
    StagedIndex,
    WriterLock,
    lock_holder,
    lock_path,
    next_path,
    open_for_reading,
    survey,
    unchanged_summary,
)


def make_db(path: Path, value: str) -> Path:
    with Store.open(path) as store:
        store.set_meta(marker=value)
    return path


def test_a_commit_replaces_the_index_in_one_step(tmp_path: Path) -> None:
    db = make_db(tmp_path / ".gbr" / "index.duckdb", "old")
    reader = open_for_reading(db)
    staged = StagedIndex(db)
    assert staged.begin() == next_path(db)
    with Store.open(staged.path) as store:
        assert store.meta()["marker"] == "old"  # a copy of the index
        store.set_meta(marker="new")
    # A WAL left beside the index belongs to the old file: replaying it onto the new one
    # would corrupt it, so the commit removes it (garbage here, so a replay would fail).
    (db.parent / "index.duckdb.wal").write_bytes(b"not a wal")
    staged.commit(IndexSummary(root=str(tmp_path), db=str(db), files_seen=3))
    assert reader.meta()["marker"] == "old"  # an open reader keeps the file it opened
    reader.close()
    with open_for_reading(db) as store:
        assert store.meta()["marker"] == "new"
        assert store.last_run() is not None and store.last_run()["db"] == str(db)
    assert not staged.path.exists() and not (db.parent / "index.duckdb.wal").exists()


def test_a_run_refused_just_as_the_holder_locks_still_names_it(tmp_path: Path) -> None:
    """The holder writes its pid just after taking the lock; one refused in between waits
    for it instead of naming "another process" (two runs started together did, in CI)."""
    db = tmp_path / "index.duckdb"
    path = lock_path(db)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # locked, nothing written yet
        late = threading.Timer(0.1, lambda: os.write(fd, b"4242 index\n"))
        late.start()
        with pytest.raises(IndexBusyError, match=r"an index run \(pid 4242\) is in progress"):
            WriterLock(db).acquire()
        late.join()
        assert lock_holder(db) == (4242, "index")
        os.ftruncate(fd, 0)  # a holder that never says who it is: named after the bound
        started = time.monotonic()
        with pytest.raises(IndexBusyError, match=r"an index run \(another process\)"):
            WriterLock(db).acquire()
        assert time.monotonic() - started < 5
    finally:
        os.close(fd)
    assert lock_holder(db) is None


def test_the_writer_lock_names_its_holder_and_lets_go(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    assert lock_holder(db) is None
    with WriterLock(db, role="daemon"):
        assert lock_holder(db)[1] == "daemon"
        with pytest.raises(IndexBusyError, match=r"a daemon \(pid \d+\) is writing"):
            WriterLock(db).acquire()
        # No index yet, and a writer at work: the reader is told, not sent to `index`.
        with pytest.raises(IndexBusyError, match="no index is complete yet"):
            open_for_reading(db)
    assert lock_holder(db) is None
    WriterLock(db).acquire()  # released: the next writer gets it at once


def test_a_run_that_changes_nothing_is_seen_before_any_write(
    small_example: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    db = tmp_path / "index.duckdb"
    first = run_index(IndexOptions(root=small_example, db=db, staged=True), model)
    assert first.files_indexed == 5 and not next_path(db).exists()
    want = {
        k: str(v)
        for k, v in _index_meta(model, IndexOptions(small_example, db).embed_format).items()
    }
    same = unchanged_summary(db, small_example, WalkOptions(), want)
    assert same is not None and (same.files_seen, same.files_unchanged) == (5, 5)
    stamp = db.stat().st_mtime_ns
    again = run_index(IndexOptions(root=small_example, db=db, staged=True), model)
    assert (again.files_unchanged, again.files_indexed) == (5, 0)
    assert db.stat().st_mtime_ns == stamp  # nothing copied, nothing written

    assert unchanged_summary(db, small_example, WalkOptions(), {**want, "dim": "1"}) is None
    isbn = small_example / "src" / "bookshelf" / "isbn.gleam"
    isbn.write_text(isbn.read_text() + "\npub fn extra() { 1 }\n")
    assert unchanged_summary(db, small_example, WalkOptions(), want) is None
    changed = run_index(IndexOptions(root=small_example, db=db, staged=True), model)
    assert changed.files_indexed == 1 and db.stat().st_mtime_ns != stamp
    isbn.unlink()
    assert unchanged_summary(db, small_example, WalkOptions(), want) is None


def test_a_run_with_a_change_walks_and_reads_each_file_once(
    small_example: Path, tmp_path: Path, model: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The no-change check stops at the first change, and the run's walker goes on from
    there with the files it hashed: no file is read twice, wherever the change is."""
    db = tmp_path / "index.duckdb"
    run_index(IndexOptions(root=small_example, db=db, staged=True), model)
    paths = [item.path for item in walker.walk(small_example)]
    last = small_example / paths[-1]  # the change the check meets last
    last.write_text(last.read_text() + "\npub fn extra() { 1 }\n")
    want = {
        k: str(v)
        for k, v in _index_meta(model, IndexOptions(small_example, db).embed_format).items()
    }
    begun = survey(db, small_example, WalkOptions(), want)
    assert isinstance(begun, WalkBegun) and [h.path for h in begun.hashed] == paths[:-1]
    assert begun.take() is not None and begun.take() is None  # a restarted walker walks afresh

    reads: Counter[str] = Counter()
    real = walker.read_file

    def counted(found: FoundFile, max_bytes: int) -> object:
        reads[found.path] += 1
        return real(found, max_bytes)

    monkeypatch.setattr(walker, "read_file", counted)
    monkeypatch.setattr(stages, "read_file", counted)
    changed = run_index(IndexOptions(root=small_example, db=db, staged=True), model)
    assert (changed.files_indexed, changed.files_unchanged) == (1, len(paths) - 1)
    assert reads == Counter(paths)
