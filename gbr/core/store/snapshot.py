"""Readers keep the last complete index while an `index` run writes the next one.

DuckDB lets one process hold a file for writing and then nobody else may even read it, so a
`gleambrctl index` run without a daemon used to make every `search` and `status` fail with
DuckDB's raw lock error. Here a run without a daemon writes a copy, `<index>.next`, and renames
it over the index at the end, in one atomic step:

- a reader opens either the old complete file or the new complete one, never a half-run, and
  one that opened the old file keeps reading it (the open file outlives the rename);
- writers are serialised by an advisory lock on `<index>.lock` that names its holder; a
  daemon holds it for its life, since it writes the file in place;
- a run that finds nothing changed copies and writes nothing (`survey`).

Free space: a run needs room for one copy of the index beside it, and the copy grows by
what the run changes: the first change to a freshly built index rewrites its full-text
tables into new blocks and can nearly double it (3.9 MB -> 7.4 MB for a one-line change; a
later one grew 5.8 MB -> 7.6 MB). `begin` checks the least a run can need (the copy itself),
failing in one line that names the figure; a disk that fills later is the one-line write
error. While vectors fill in, a run shows its copy to readers by copying it once more
(`publish`): that needs room for a second copy, and is skipped (event `publish_skipped`)
when the disk has none, so a run never needs more than one copy's room, and readers then
see the old index until the end.

A reader that still meets a lock (a daemon starting or stopping, an older gbr writing in
place) retries for READ_WAIT seconds, then says in one line who holds it (IndexBusyError,
exit code 75).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from gbr.core.errors import IndexBusyError, StoreError, StoreWriteError
from gbr.core.records import FileProblem, IndexSummary
from gbr.core.store.errors import write_error
from gbr.core.store.facade import SCHEMA_VERSION, Store
from gbr.core.store.lock import LOCK_WAIT, held_message, lock_conflict
from gbr.core.store.test_words import TestWords
from gbr.core.telemetry import log

if TYPE_CHECKING:
    from gbr.core.parse.walker import WalkBegun, WalkOptions

READ_WAIT = 3.0  # seconds a reader retries an index locked by a writer
# Room asked beyond a copy's own size, for what a run adds to it: a share of it, at least
# a floor (a DuckDB file grows by 256 KiB blocks, and its WAL beside it).
SPACE_SHARE = 0.10
SPACE_FLOOR = 2 << 20
_RETRY_STEP = 0.05
_DUCKDB_PID = re.compile(r"\(PID (\d+)\)")


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def next_path(db: Path) -> Path:
    return db.with_name(db.name + ".next")


def _wal(db: Path) -> Path:
    return db.with_name(db.name + ".wal")


# ------------------------------------------------------------------------ the writer lock


# How long a refused process waits for the lock's holder to write who it is.
HOLDER_WAIT = 0.5


def lock_holder(db: Path) -> tuple[int, str] | None:
    """(pid, role) of the process holding `<index>.lock` now, or None when nobody does."""
    try:
        fd = os.open(lock_path(db), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_holder(fd)
        return None  # nobody holds it; closing drops the shared lock just taken
    finally:
        os.close(fd)


def read_holder(fd: int, wait: float = HOLDER_WAIT) -> tuple[int, str]:
    """(pid, role) written in the lock file by its holder (pid 0 when it never comes).

    The holder writes them just after taking the lock, so a process refused in between
    found the file empty and named "another process" (two runs started together did, in
    CI): an empty file is read again for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        text = os.pread(fd, 100, 0).decode("ascii", "replace")
        if text.strip() or time.monotonic() >= deadline:
            return _parse_holder(text)
        time.sleep(0.005)


def _parse_holder(text: str) -> tuple[int, str]:
    pid, _, role = text.strip().partition(" ")
    return (int(pid) if pid.isdigit() else 0), (role or "index")


def busy_message(db: Path, pid: int, role: str, retry: str) -> str:
    who = f"pid {pid}" if pid else "another process"
    if role == "daemon":
        return f"a daemon ({who}) is writing {db}; {retry}"
    return f"an index run ({who}) is in progress on {db}; {retry}"


class WriterLock:
    """The one-writer lock on `<index>.lock`; the kernel drops it when the holder dies."""

    def __init__(self, db: Path, role: str = "index") -> None:
        self.db = Path(db).absolute()
        self.role = role
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock at once, or raise IndexBusyError naming the holder."""
        path = lock_path(self.db)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only or immutable folder: one line, with the fix
            raise write_error(self.db, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, role = read_holder(fd)
            os.close(fd)
            raise IndexBusyError(
                busy_message(self.db, pid, role, "try again when it finishes")
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.role}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ------------------------------------------------------------------------------ readers


def open_for_reading(db: Path, wait: float = READ_WAIT) -> Store:
    """The index opened read-only; a lock held by a writer is retried for `wait` seconds,
    then reported in one line (IndexBusyError) instead of DuckDB's error."""
    deadline = time.monotonic() + wait
    while True:
        if not db.is_file() and (holder := lock_holder(db)) is not None:
            raise IndexBusyError(
                busy_message(db, *holder, "no index is complete yet; try again when it finishes")
            )
        try:
            return Store.open(db, read_only=True)
        except StoreError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, duckdb.IOException) and "lock" in str(cause).lower()):
                raise
            if time.monotonic() >= deadline:
                raise IndexBusyError(_who_holds(db, cause, wait)) from None
            time.sleep(_RETRY_STEP)


def _who_holds(db: Path, refusal: BaseException, waited: float) -> str:
    """The one line for a read refused by DuckDB's lock: the gbr writer named in
    `<index>.lock` when it is the process DuckDB names; else whoever DuckDB names. This
    process may hold `<index>.lock` itself (an index run checking what changed), and a
    program that is not gbr may hold the file: neither is "an index run"."""
    found = _DUCKDB_PID.search(str(refusal))
    holder = lock_holder(db)
    if (
        holder is not None
        and holder[0] != os.getpid()
        and (found is None or int(found.group(1)) == holder[0])
    ):
        return busy_message(db, *holder, "try again in a few seconds")
    return held_message(db, lock_conflict(refusal) or "", waited)


# ------------------------------------------------------------------------------ writers


def _copy(src: Path, dst: Path) -> None:
    """Copy a file; copy_file_range lets the kernel share extents (a reflink on btrfs or
    XFS) or at least copy without a trip through user space."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            left = os.fstat(fin.fileno()).st_size
            while left > 0:
                done = os.copy_file_range(fin.fileno(), fout.fileno(), left)
                if done == 0:
                    break
                left -= done
        except OSError:
            fin.seek(0)
            fout.seek(0)
            fout.truncate()
            shutil.copyfileobj(fin, fout, 1 << 20)


def room_for_copy(size: int) -> int:
    """Free bytes a copy of `size` bytes needs to be written and grow a little."""
    return size + max(SPACE_FLOOR, int(size * SPACE_SHARE))


def free_space(folder: Path) -> int | None:
    """Free bytes for this process on the file system holding `folder` (None: unknown)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class StagedIndex:
    """The copy a run writes, renamed over the index by `commit`. Hold the WriterLock."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)
        self.path = next_path(self.db)

    def begin(self, copy: bool = True) -> Path:
        """Start from a copy of the index (and its WAL, if a crashed writer left one), or
        from nothing when not `copy` (a rebuild)."""
        self.discard()  # a run killed before its commit left these behind
        self._check_room(copy)
        try:
            if copy and self.db.is_file():
                _copy(self.db, self.path)
                if _wal(self.db).is_file():
                    _copy(_wal(self.db), _wal(self.path))
        except OSError as exc:
            self.discard()
            raise write_error(self.db, exc) from exc
        return self.path

    def _check_room(self, copy: bool) -> None:
        """Fail before writing anything when the disk cannot hold the run (StoreWriteError).

        A rebuild writes a new index beside the old one, which readers keep until the commit;
        the new one ends about the old one's size, so it asks for the same room as a copy.
        """
        size = sum(p.stat().st_size for p in (self.db, _wal(self.db)) if p.is_file())
        need, free = room_for_copy(size), free_space(self.db.parent)
        if free is not None and free < need:
            what = (
                f"its copy of the {_megabytes(size)} index (a change can grow the copy up to "
                "twice that)"
                if copy
                else f"the new index it builds while the old one ({_megabytes(size)}) is kept "
                "for searches until it ends"
            )
            raise StoreWriteError(
                f"not enough free space to index into {self.db}: a run needs at least "
                f"{_megabytes(need)} free beside the index for {what}, and "
                f"{_megabytes(free)} is free; free some space on that disk, then run again"
            )

    def commit(self, summary: IndexSummary | None) -> None:
        """Check the copy opens, record the run (if it finished) under the index's own name,
        and rename it over the index: readers see the old file or the new one, nothing
        between."""
        with Store.open(self.path) as store:
            if summary is not None:
                store.set_meta(last_run=json.dumps(summary.as_dict()))
        # The close above folded the WAL in. An old WAL beside the index belongs to the old
        # file and must not be replayed onto the new one.
        _wal(self.db).unlink(missing_ok=True)
        os.replace(self.path, self.db)
        _fsync_dir(self.db.parent)

    def publish(self, store: Store) -> None:
        """Show the copy, as written so far, to readers: copied and renamed over the index.

        `store` is the run's writer, which writes nothing until this returns: the WAL is
        folded in first, so the file is whole. That is skipped (until the next time) while
        another connection of this process reads. Readers that opened the old index keep
        it; the run goes on in the copy.
        """
        self.keep(store, wait=1.0)

    def keep(self, store: Store, wait: float) -> bool:
        """`publish`, waiting up to `wait` s for readers in this process; False if skipped.
        An interrupted run calls it last, to keep what it finished."""
        if not store.checkpoint(wait=wait):
            log().info("publish_deferred", reason="another connection is reading")
            return False
        size = self.path.stat().st_size if self.path.is_file() else 0
        free = free_space(self.db.parent)
        if free is not None and free < room_for_copy(size):
            # A second copy would not fit: readers keep the old index until the commit.
            log().info(
                "publish_skipped",
                reason="no room for a second copy",
                need=room_for_copy(size),
                free=free,
            )
            return False
        tmp = self.db.with_name(self.db.name + ".publish")
        try:
            _copy(self.path, tmp)
            _wal(self.db).unlink(missing_ok=True)
            os.replace(tmp, self.db)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise write_error(self.db, exc) from exc
        _fsync_dir(self.db.parent)
        return True

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
        _wal(self.path).unlink(missing_ok=True)


class PublishPace:
    """When a run shows its copy to readers again while vectors fill in: every
    `every` seconds at least, and never more than `share` of the time (a copy of a big
    index costs seconds; the first publish, once the chunks are in, is not paced)."""

    def __init__(self, every: float = 10.0, share: float = 0.05) -> None:
        self.every, self.share = every, share
        self._last = time.monotonic()
        self._cost = 0.0

    def due(self) -> bool:
        wait = max(self.every, self._cost / self.share)
        return time.monotonic() - self._last >= wait

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self._last = time.monotonic()
            self._cost = self._last - started


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def unchanged_summary(
    db: Path, root: Path, options: WalkOptions, want: Mapping[str, str]
) -> IndexSummary | None:
    """The summary of a run that would change nothing, or None when it would change something."""
    found = survey(db, root, options, want)
    return found if isinstance(found, IndexSummary) else None


def survey(
    db: Path,
    root: Path,
    options: WalkOptions,
    want: Mapping[str, str],
    wait: float = LOCK_WAIT,
    lend: TestWords | None = None,
) -> IndexSummary | WalkBegun | None:
    """The summary of a run that would change nothing; else the walk so far, stopped at the
    first change, for the run to go on with (WalkBegun); None when no walk was needed to
    know (no index, another model or chunker, a stale full-text index, vectors missing).
    A file another process holds is waited for up to `wait` seconds, as a run in place
    waits (gbr.core.store.lock).

    It walks and hashes as the pipeline's walker does: same files, same hashes, same model
    and chunker (`want`, the meta `Store.prepare` checks), same root, and a fresh full-text
    index built with today's settings and lent words (`lend`). A file that failed before and
    is unchanged fails again, so it is reported as dropped with its stored reason (the line
    and column are not stored).
    """
    from gbr.core.parse.walker import (  # only `index` asks; a search opens here too
        HashedFile,
        WalkBegun,
        read_file,
        walk,
    )

    started = time.monotonic()
    if not db.is_file():
        return None
    with open_for_reading(db, wait) as store:
        meta = store.meta()
        wanted = {"schema_version": SCHEMA_VERSION, "root": str(root), **want}
        if any(meta.get(k) != v for k, v in wanted.items()):
            return None
        if not store.has_fulltext() or store.fulltext_stale() or store.fulltext_outdated(lend=lend):
            return None
        embedded, chunks = store.coverage()
        if embedded < chunks:  # a run cut short left vectors to embed
            return None
        states = store.file_states()
        failed = {f.path: f for f in store.failed_files()}
        partial = {f.path: f for f in store.failed_files("partial")}
    hashed: list[HashedFile] = []
    walking = walk(root, options)
    for item in walking:
        if isinstance(item, FileProblem):
            return WalkBegun(hashed, itertools.chain([item], walking))
        source = read_file(item, options.max_bytes)
        state = states.get(item.path)
        if (
            isinstance(source, FileProblem)
            or state is None
            or state.content_hash != source.content_hash
        ):
            return WalkBegun(hashed, itertools.chain([source], walking))
        hashed.append(HashedFile(item, source.content_hash))
    seen = {h.path for h in hashed}
    if seen != set(states):
        return WalkBegun(hashed, iter(()))  # files were removed
    dropped = [failed[path].problem() for path in sorted(seen & set(failed))]
    # An unchanged partial file is still partial (`--strict` must keep failing on it).
    partly = [partial[path].problem() for path in sorted(seen & set(partial))]
    return IndexSummary(
        root=str(root),
        db=str(db),
        files_seen=len(seen),
        files_unchanged=len(seen) - len(dropped),
        files_dropped=len(dropped),
        files_partial=len(partly),
        seconds=time.monotonic() - started,
        chunks_in_index=chunks,
        dropped=tuple(dropped),
        partial=tuple(partly),
    )
