"""The shared embed cache: reuse across indexes and chunker bumps, its bound, its failures,
and two real processes writing it at once."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from gbr.actors import pipeline
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed import cache as embed_cache
from gbr.core.embed.cache import EmbedCache, describe
from gbr.core.embed.cache_config import CacheConfig, cache_config
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import ConfigError
from gbr.core.store.facade import Store
from gbr.core.store.indexing import embed_key
from tests.conftest import REPO

DIM = 384


def vectors_by_hash(db: Path) -> dict[str, np.ndarray]:
    with Store.open(db, read_only=True) as store:
        rows = store.con.execute("SELECT embed_hash, embedding FROM chunks").fetchall()
    return {h: np.asarray(v, dtype=np.float32) for h, v in rows}


def fake_vector(key: str) -> np.ndarray:
    """A unit vector determined by its key, so any process can check what another wrote."""
    rng = np.random.default_rng(int(key[:8], 16))
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def keys(prefix: str, n: int) -> list[str]:
    return [embed_key("test-model", f"{prefix} {i}") for i in range(n)]


def test_a_second_package_is_served_from_the_cache(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(small_example, other)
    first = run_index(
        IndexOptions(
            root=small_example, db=tmp_path / "a.duckdb", embed_cache=cache_config(os.environ)
        ),
        model,
    )
    assert first.chunks_embedded == first.chunks > 0
    assert (first.cache_hits, first.cache_misses) == (0, first.chunks)

    second = run_index(
        IndexOptions(root=other, db=tmp_path / "b.duckdb", embed_cache=cache_config(os.environ)),
        model,
    )

    assert second.chunks == first.chunks
    assert second.chunks_embedded == 0  # every text was embedded once, for the first index
    assert (second.cache_hits, second.cache_misses) == (second.chunks, 0)
    a, b = vectors_by_hash(tmp_path / "a.duckdb"), vectors_by_hash(tmp_path / "b.duckdb")
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[h], b[h]) for h in a)


def test_a_chunker_bump_embeds_only_the_texts_that_changed(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "index.duckdb"
    first = run_index(
        IndexOptions(root=small_example, db=db, embed_cache=cache_config(os.environ)), model
    )
    with (small_example / "src/bookshelf/isbn.gleam").open("a") as handle:
        handle.write("\npub fn brand_new_after_the_bump() -> Int {\n  7\n}\n")
    monkeypatch.setattr(pipeline, "CHUNKER_VERSION", "bumped-for-a-test")

    again = run_index(
        IndexOptions(root=small_example, db=db, embed_cache=cache_config(os.environ)), model
    )

    assert again.reindex_reason  # the tables were wiped: every file was chunked again
    assert again.files_indexed == first.files_indexed
    assert again.chunks_embedded == 1  # the new function alone
    assert again.cache_hits == again.chunks - 1 == first.chunks


def test_off_means_no_file_and_no_hits(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    config = cache_config(os.environ)
    assert config is not None and not config.path.exists()
    summary = run_index(
        IndexOptions(root=small_example, db=tmp_path / "i.duckdb", embed_cache=None), model
    )
    assert summary.chunks_embedded == summary.chunks
    assert (summary.cache_hits, summary.cache_misses) == (0, 0)
    assert not config.path.exists()


def test_the_environment_sets_the_file_the_cap_and_the_switch(tmp_path: Path) -> None:
    config = cache_config({"GBR_HOME": str(tmp_path), "GBR_EMBED_CACHE_SIZE": "2MB"})
    assert config == CacheConfig(tmp_path / "embed-cache.sqlite", 2_000_000)
    assert cache_config({"GBR_HOME": str(tmp_path), "GBR_EMBED_CACHE": "off"}) is None
    fallback = cache_config({"XDG_CACHE_HOME": str(tmp_path)})
    assert fallback is not None and fallback.path == tmp_path / "gbr" / "embed-cache.sqlite"
    with pytest.raises(ConfigError, match="GBR_EMBED_CACHE_SIZE='lots'"):
        cache_config({"GBR_HOME": str(tmp_path), "GBR_EMBED_CACHE_SIZE": "lots"})


def test_lookups_give_back_exactly_what_was_stored(tmp_path: Path) -> None:
    cache = EmbedCache(CacheConfig(tmp_path / "c.sqlite"), DIM)
    stored = {k: fake_vector(k) for k in keys("stored", 30)}
    cache.store(stored)
    asked = [*stored, *keys("absent", 5)]
    found = cache.lookup(asked)
    assert found.keys() == stored.keys()
    assert all(np.array_equal(found[k], stored[k]) for k in stored)
    assert (cache.stats.hits, cache.stats.misses, cache.stats.stored) == (30, 5, 30)
    cache.close()
    # Another dimension never gets these vectors, even under the same keys.
    assert EmbedCache(CacheConfig(tmp_path / "c.sqlite"), 768).lookup(list(stored)) == {}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


def test_past_the_cap_the_least_recently_used_go_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(embed_cache, "time", clock)
    config = CacheConfig(
        tmp_path / "c.sqlite", max_bytes=100 * (DIM * 4 + embed_cache.ROW_OVERHEAD)
    )
    cache = EmbedCache(config, DIM)
    assert cache.max_rows == 100
    old = keys("old", 80)
    cache.store({k: fake_vector(k) for k in old})
    clock.now += 2 * embed_cache.TOUCH_AFTER
    assert len(cache.lookup(old[:10])) == 10  # used again: these stay
    clock.now += 2 * embed_cache.TOUCH_AFTER
    new = keys("new", 40)
    cache.store({k: fake_vector(k) for k in new})  # 120 rows: down to 90

    kept = cache.lookup([*old, *new]).keys()
    assert set(kept) == {*old[:10], *old[40:], *new}
    assert cache.stats.evicted == 30
    assert describe(config)["rows"] == 90


def test_the_file_stays_within_its_cap(tmp_path: Path) -> None:
    config = CacheConfig(tmp_path / "c.sqlite", max_bytes=3_000_000)
    cache = EmbedCache(config, DIM)
    for batch in range(40):  # about four times what the cap holds
        cache.store({k: fake_vector(k) for k in keys(f"batch {batch}", 150)})
    cache.close()
    report = describe(config)
    assert report["rows"] <= cache.max_rows
    assert report["bytes"] <= config.max_bytes, report


def test_a_garbage_file_costs_one_warning_and_is_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    garbage = b"not a database at all\n" * 400
    path.write_bytes(garbage)
    warnings: list[str] = []
    cache = EmbedCache(CacheConfig(path), DIM, warn=warnings.append)

    assert cache.lookup(keys("x", 3)) == {}
    cache.store({k: fake_vector(k) for k in keys("x", 3)})
    assert cache.lookup(keys("x", 3)) == {}

    assert len(warnings) == 1
    assert str(path) in warnings[0] and "GBR_EMBED_CACHE=off" in warnings[0]
    assert cache.off_reason is not None and "not a database" in cache.off_reason
    assert path.read_bytes() == garbage  # nothing of the user's is touched
    assert "error" in describe(CacheConfig(path))


def test_a_cache_locked_too_long_is_given_up_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.sqlite"
    EmbedCache(CacheConfig(path), DIM).store({k: fake_vector(k) for k in keys("a", 2)})
    monkeypatch.setattr(embed_cache, "BUSY_TIMEOUT", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    warnings: list[str] = []
    try:
        cache = EmbedCache(CacheConfig(path), DIM, warn=warnings.append)
        cache.store({k: fake_vector(k) for k in keys("b", 2)})
        assert cache.lookup(keys("a", 2)) == {}
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(warnings) == 1 and "locked" in warnings[0]
    assert len(EmbedCache(CacheConfig(path), DIM).lookup(keys("a", 2))) == 2  # nothing lost


def test_a_new_cache_opened_while_another_process_writes_waits_its_turn(
    tmp_path: Path,
) -> None:
    """Switching a file to WAL while another connection holds its write lock is refused at
    once by SQLite (no busy handler: waiting could deadlock); two runs opening a new cache
    together met that one time in thirty. The opener must wait, not turn the cache off."""
    path = tmp_path / "c.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE early(a)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO early VALUES (1)")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    warnings: list[str] = []
    try:
        cache = EmbedCache(CacheConfig(path), DIM, warn=warnings.append)
        cache.store({k: fake_vector(k) for k in keys("a", 2)})
        assert len(cache.lookup(keys("a", 2))) == 2
        cache.close()
    finally:
        release.join()
        holder.close()
    assert warnings == []


def test_an_index_goes_on_when_the_cache_folder_cannot_be_made(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    config = CacheConfig(blocker / "home" / "embed-cache.sqlite")
    summary = run_index(
        IndexOptions(root=small_example, db=tmp_path / "i.duckdb", embed_cache=config), model
    )
    assert summary.files_indexed == 5 and summary.chunks_embedded == summary.chunks
    assert (summary.cache_hits, summary.cache_misses) == (0, 0)
    with Store.open(tmp_path / "i.duckdb", read_only=True) as store:
        assert store.counts()["chunks"] == summary.chunks


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tests.core.test_embed_cache import DIM, fake_vector, keys
    from gbr.core.embed.cache import EmbedCache
    from gbr.core.embed.cache_config import CacheConfig

    path, name, go = Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    warnings = []
    cache = EmbedCache(CacheConfig(path), DIM, warn=warnings.append)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for batch in range(40):
        shared, own = keys(f"shared {batch}", 20), keys(f"{name} {batch}", 20)
        cache.store({k: fake_vector(k) for k in shared + own})
        found = cache.lookup(shared)
        assert len(found) == 20, (batch, len(found))
    cache.close()
    print("warnings:", len(warnings), *warnings)
    sys.exit(1 if warnings or cache.off_reason else 0)
    """
)


def test_two_processes_write_the_same_cache_at_once(tmp_path: Path) -> None:
    path, go = tmp_path / "c.sqlite", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(REPO), str(path), name, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("left", "right")
    ]
    go.touch()
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = conn.execute("SELECT key, vector FROM vectors").fetchall()
    counted = conn.execute("SELECT value FROM meta WHERE name = 'rows'").fetchone()[0]
    conn.close()
    assert len(rows) == counted == 40 * 20 * 3  # shared once, and each process's own
    assert all(
        np.array_equal(np.frombuffer(v, dtype=np.float32), fake_vector(k.hex())) for k, v in rows
    )


def test_vectors_that_are_not_finite_are_never_stored(tmp_path: Path) -> None:
    said: list[str] = []
    cache = EmbedCache(CacheConfig(tmp_path / "c.sqlite"), DIM, warn=said.append)
    good, bad, inf = keys("finite", 3)
    cache.store({good: fake_vector(good), bad: np.full(DIM, np.nan), inf: np.full(DIM, np.inf)})
    assert cache.lookup([good, bad, inf]).keys() == {good}
    assert (cache.stats.stored, cache.stats.refused) == (1, 2)
    assert len(said) == 1 and "not finite" in said[0]


def test_a_cache_of_the_first_format_is_emptied_once(tmp_path: Path) -> None:
    """Its rows carry no checksum: a damaged graph may have made them, so none is served."""
    path = tmp_path / "c.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute(
        "CREATE TABLE vectors(id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, "
        "vector BLOB NOT NULL, used INTEGER NOT NULL)"
    )
    old.execute("CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    old.execute("INSERT INTO meta VALUES ('rows', 1), ('format', 1)")
    (key,) = keys("old", 1)
    old.execute(
        "INSERT INTO vectors(key, vector, used) VALUES (?, ?, 0)",
        (bytes.fromhex(key), fake_vector(key).tobytes()),
    )
    old.close()
    said: list[str] = []
    cache = EmbedCache(CacheConfig(path), DIM, warn=said.append)
    assert cache.lookup([key]) == {}
    cache.store({key: fake_vector(key)})
    assert np.array_equal(cache.lookup([key])[key], fake_vector(key))
    assert said == [] and describe(CacheConfig(path))["rows"] == 1
