"""Vectors shared by every index of one user: (model id, exact embedded text) -> vector.

The per-index reuse (`Store.cached_vectors`) only sees chunks already in that index. This
cache outlives any one index, so a function text seen in another file, another package, a
dependency under `build/packages`, or an index wiped by a chunker bump costs one lookup.

It is one SQLite file under the gbr home (`$GBR_HOME/embed-cache.sqlite`, else
`$XDG_CACHE_HOME/gbr/` or `~/.cache/gbr/`). SQLite rather than DuckDB because two processes
must share it: in WAL mode readers never wait, and writers take turns under a bounded busy
timeout, where DuckDB lets one process alone open a file for writing.

The cache is an accelerator, never a source of truth or of failure: a damaged, locked or
unwritable file costs one warning line, and the run goes on without it, embedding as usual.
Its size is bounded (GBR_EMBED_CACHE_SIZE, default 512MB); past the cap the least recently
used vectors go first. GBR_EMBED_CACHE=off (or `index --no-embed-cache`) turns it off.

Nor is a row trusted blindly: each carries a checksum over its key (the hash of the model id
and the exact text) and its vector, so a row holding another text's vector, flipped bytes,
or a vector that is not finite is refused: a miss, deleted, embedded again, and one warning
for the run. Vectors that are not finite are never stored. A file of the first format, whose
rows carry no checksum, is emptied once.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import monotonic, sleep  # apart from `time`, which tests replace with a clock
from typing import Any

import numpy as np

from gbr.core.embed.cache_config import SWITCH_ENV, CacheConfig
from gbr.core.telemetry import Warn, log, warning_line

# SQLite bytes per cached vector beyond the vector itself: the 32-byte key twice (row and
# unique index), the `used` index, cell headers and page slack (measured: 2.13-2.19 KB a row at
# 384 dimensions, tests/core/test_embed_cache.py checks the bound).
ROW_OVERHEAD = 700
BUSY_TIMEOUT = 10.0  # seconds a writer waits for the other process's turn before giving up
TOUCH_AFTER = 600  # seconds; a hit refreshes `used` no more often, so lookups rarely write
EVICT_TO = 0.9  # past the cap, the oldest go until this share of it is left
_IN_CHUNK = 500  # keys per `IN (...)`: well under SQLite's variable limit


@dataclass(slots=True)
class CacheStats:
    """What one run asked of the cache."""

    hits: int = 0
    misses: int = 0
    stored: int = 0
    evicted: int = 0
    refused: int = 0  # rows that failed their checksum or were not finite, and vectors not stored


class EmbedCache:
    """The shared vector cache for one model dimension; thread-safe, opened on first use.

    Every SQLite or OS error ends its use for this run: one warning (`warn`, by default a
    line on stderr) and a telemetry event say why, and lookups find nothing from then on.
    """

    def __init__(self, config: CacheConfig, dim: int, warn: Warn | None = None) -> None:
        self.config = config
        self.dim = dim
        self.stats = CacheStats()
        self.off_reason: str | None = None
        self._warn = warn or warning_line
        self._conn: sqlite3.Connection | None = None
        self._missed: set[str] = set()  # keys asked for and not found, so far
        self._warned_refusal = False
        self._lock = threading.Lock()
        self.max_rows = max(1, config.max_bytes // (dim * 4 + ROW_OVERHEAD))

    @property
    def path(self) -> Path:
        return self.config.path

    def lookup(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for those of `keys` (hex embed keys) the cache holds."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        found: dict[str, np.ndarray] | None = self._guarded(lambda conn: self._lookup(conn, wanted))
        if found is None:  # off: nothing was asked of it
            return {}
        # A run asks again for what it wrote without a vector (another process may have
        # stored it meanwhile): each key counts once, as its last answer says.
        again = {k for k in wanted if k in self._missed}
        self.stats.hits += len(found)
        self.stats.misses += sum(1 for k in wanted if k not in found and k not in again)
        self.stats.misses -= sum(1 for k in found if k in again)
        self._missed.update(k for k in wanted if k not in found)
        self._missed.difference_update(found)
        return found

    def store(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Add vectors the model just made; past the cap, the least recently used go."""
        if vectors:
            self._guarded(lambda conn: self._store(conn, vectors))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    # -- inside the lock

    def _guarded(self, work: Any) -> Any:
        with self._lock:
            if self.off_reason is not None:
                return None
            try:
                if self._conn is None:
                    self._conn = _connect(self.config.path)
                return work(self._conn)
            except Exception as exc:  # an accelerator: whatever goes wrong, go on without it
                self._turn_off(exc)
                return None

    def _turn_off(self, exc: BaseException) -> None:
        self.off_reason = f"{type(exc).__name__}: {exc}"
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        log().warning("embed_cache_off", path=str(self.path), reason=self.off_reason)
        fix = (
            "another process held it too long; the next run uses it again"
            if "locked" in str(exc)
            else "delete the file (or fix its folder's permissions)"
        )
        self._warn(
            f"the embed cache {self.path} cannot be used ({exc}); indexing goes on without it; "
            f"{fix}, or set {SWITCH_ENV}=off"
        )

    def _lookup(self, conn: sqlite3.Connection, wanted: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        stale: list[bytes] = []
        refused: list[bytes] = []
        now = int(time.time())
        width = self.dim * 4
        for at in range(0, len(wanted), _IN_CHUNK):
            part = [bytes.fromhex(k) for k in wanted[at : at + _IN_CHUNK]]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT key, vector, used, sum FROM vectors WHERE key IN ({marks})", part
            ).fetchall()
            for key, blob, used, check in rows:
                if len(blob) != width:
                    continue  # another dimension under a colliding id: never serve it
                vector = np.frombuffer(blob, dtype=np.float32)
                if check != row_sum(key, blob) or not np.isfinite(vector).all():
                    refused.append(key)
                    continue
                found[key.hex()] = vector.copy()
                if used < now - TOUCH_AFTER:
                    stale.append(key)
        if stale or refused:
            with _write(conn):
                conn.executemany(
                    "UPDATE vectors SET used = ? WHERE key = ?", [(now, k) for k in stale]
                )
                if refused:
                    gone = conn.executemany(
                        "DELETE FROM vectors WHERE key = ?", [(k,) for k in refused]
                    ).rowcount
                    _bump_rows(conn, -gone)
        if refused:
            self._refused(len(refused), "failed their checksum or were not finite")
        return found

    def _refused(self, count: int, why: str) -> None:
        """Count refused rows; the first refusal of a run is one event and one warning."""
        self.stats.refused += count
        if self._warned_refusal:
            return
        self._warned_refusal = True
        log().warning("embed_cache_rows_refused", path=str(self.path), rows=count, reason=why)
        self._warn(
            f"the embed cache {self.path}: {count} vector(s) {why}; they are embedded again "
            "(if this recurs, delete the file)"
        )

    def _store(self, conn: sqlite3.Connection, vectors: Mapping[str, np.ndarray]) -> None:
        now = int(time.time())
        rows = []
        for k, v in vectors.items():
            vector = np.asarray(v, dtype=np.float32)
            if vector.shape != (self.dim,) or not np.isfinite(vector).all():
                self._refused(1, "were not finite vectors of the cache's width, and not stored")
                continue
            key, blob = bytes.fromhex(k), vector.tobytes()
            rows.append((key, blob, now, row_sum(key, blob)))
        rows = rows[: self.max_rows]
        if not rows:
            return
        with _write(conn):
            # Room first, so that the file never holds more than the cap (an INSERT OR
            # IGNORE may add fewer rows than offered; the bound counts them all).
            count = _bump_rows(conn, 0)
            evicted = 0
            if count + len(rows) > self.max_rows:
                over = count + len(rows) - int(self.max_rows * EVICT_TO)
                evicted = conn.execute(
                    "DELETE FROM vectors WHERE id IN "
                    "(SELECT id FROM vectors ORDER BY used, id LIMIT ?)",
                    (over,),
                ).rowcount
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO vectors(key, vector, used, sum) VALUES (?, ?, ?, ?)", rows
            )
            added = conn.total_changes - before
            _bump_rows(conn, added - evicted)
        self.stats.stored += added
        self.stats.evicted += evicted
        if evicted:
            log().info("embed_cache_evicted", rows=evicted, cap_rows=self.max_rows)


class _write:
    """One IMMEDIATE transaction: it takes the write lock at the start (waiting at most the
    busy timeout), so two processes never deadlock upgrading a read to a write."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def row_sum(key: bytes, vector: bytes) -> bytes:
    """A row's checksum: its key (sha256 of model id and text) and its vector's bytes."""
    return hashlib.blake2b(key + vector, digest_size=8, person=b"gbr-cache-row").digest()


def _bump_rows(conn: sqlite3.Connection, by: int) -> int:
    conn.execute("UPDATE meta SET value = value + ? WHERE name = 'rows'", (by,))
    return int(conn.execute("SELECT value FROM meta WHERE name = 'rows'").fetchone()[0])


FORMAT = 2  # 2: each row carries its checksum (`sum`)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors("
    "id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL, "
    "used INTEGER NOT NULL, sum BLOB)",
    "CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used, id)",
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    f"INSERT OR IGNORE INTO meta VALUES ('rows', 0), ('format', {FORMAT})",
)


def _upgrade(conn: sqlite3.Connection) -> None:
    """A file of the first format: its rows carry no checksum, so none can be trusted (a
    damaged graph may have made them): they go, and the rows get their column."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(vectors)")}
    if "sum" in columns:
        return
    gone = conn.execute("DELETE FROM vectors").rowcount
    conn.execute("ALTER TABLE vectors ADD COLUMN sum BLOB")
    conn.execute("UPDATE meta SET value = 0 WHERE name = 'rows'")
    conn.execute("UPDATE meta SET value = ? WHERE name = 'format'", (FORMAT,))
    log().info("embed_cache_upgraded", rows_dropped=gone)


def _connect(path: Path) -> sqlite3.Connection:
    """Open (creating when missing) in WAL mode; a file that is not ours raises here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
    )
    try:
        _enter_wal(conn, monotonic() + BUSY_TIMEOUT)
        conn.execute(
            "PRAGMA synchronous=NORMAL"
        )  # WAL: a crash may lose the last commit, never corrupt
        with _write(conn):
            for statement in _SCHEMA:
                conn.execute(statement)
            _upgrade(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _enter_wal(conn: sqlite3.Connection, deadline: float) -> None:
    """Switch a fresh file to WAL, taking turns with another process doing the same.

    The switch upgrades a read lock to an exclusive one, and SQLite answers "locked" at once,
    without its busy handler, when another connection holds a write lock meanwhile (waiting
    could deadlock). Two processes opening a new cache together hit that, so the switch is
    tried again until the busy timeout; a file already in WAL returns at the first try.
    """
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or monotonic() >= deadline:
                raise
            sleep(0.02)


def describe(config: CacheConfig | None) -> dict[str, Any]:
    """What `status` shows: where the cache is, its size and its cap; read-only, never raises."""
    if config is None:
        return {"enabled": False}
    out: dict[str, Any] = {
        "enabled": True,
        "path": str(config.path),
        "max_bytes": config.max_bytes,
        "bytes": sum(
            p.stat().st_size
            for p in (config.path, config.path.with_name(config.path.name + "-wal"))
            if p.is_file()
        ),
        "rows": 0,
    }
    if not config.path.is_file():
        return out
    try:
        conn = sqlite3.connect(config.path.resolve().as_uri() + "?mode=ro", uri=True, timeout=1.0)
        try:
            out["rows"] = int(
                conn.execute("SELECT value FROM meta WHERE name = 'rows'").fetchone()[0]
            )
        finally:
            conn.close()
    except (sqlite3.Error, TypeError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
