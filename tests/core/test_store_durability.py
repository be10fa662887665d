"""The index survives a process killed at the worst moment of a long-lived writer's life.

A daemon keeps one DuckDB instance open for hours and rebuilds the full-text index after
every batch. These tests kill such a process with SIGKILL right after a rebuild, before
any checkpoint, and open the file again: the WAL must replay, and search must work.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from gbr.core.store.facade import Store

# Builds an index with a fake 4-dim vector per chunk, rebuilds the full-text index a few
# times in the same process (checkpointing between, as the writer does), then dies by
# SIGKILL after one more rebuild that no checkpoint folded in.
SCRIPT = textwrap.dedent(
    """
    import hashlib, os, signal, sys
    import numpy as np
    from gbr.core.parse.chunker import chunk_file, new_parser
    from gbr.core.records import SourceFile
    from gbr.core.store.facade import Store, StoredChunk

    def source(name):
        text = f"/// Doc of {name}.\\npub fn {name}(x: Int) -> Int {{\\n  x + 1\\n}}\\n".encode()
        return SourceFile(f"src/{name}.gleam", name, "pkg", text,
                          hashlib.sha256(text).hexdigest(), len(text), 0.0)

    def stored(src):
        chunks = chunk_file(src, new_parser(), lambda t: len(t.split()))
        vec = np.ones(4, dtype=np.float32) / 2
        key = lambda c: hashlib.sha256(c.text.encode()).hexdigest()  # noqa: E731
        return [StoredChunk(c, f"{c.name} {c.doc}", 3, key(c), vec)
                for c in chunks]

    store = Store.open(sys.argv[1])
    store.prepare(model_id="fake", chunker_version="1", dim=4)
    for round, name in enumerate(["alpha", "beta", "gamma"]):
        src = source(name)
        store.mark_fulltext_stale()
        store.replace_file(src, stored(src))
        store.refresh_fulltext()
        if round < 2:
            store.checkpoint()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_kill_after_a_fulltext_rebuild_leaves_an_index_that_opens(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(db)], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    assert Path(f"{db}.wal").exists()  # the last rebuild is only in the WAL
    with Store.open(db, read_only=True) as store:
        assert store.counts()["chunks"] == 3
        assert [doc for doc, _ in store.bm25("gamma", 5)]
        assert not store.fulltext_stale()


def test_the_stale_flag_survives_until_a_rebuild_clears_it(tmp_path: Path) -> None:
    with Store.open(tmp_path / "index.duckdb") as store:
        store.prepare(model_id="fake", chunker_version="1", dim=4)
        assert not store.fulltext_stale()
        store.mark_fulltext_stale()
    with Store.open(tmp_path / "index.duckdb") as store:
        assert store.fulltext_stale()
        store.refresh_fulltext()
        assert not store.fulltext_stale() and store.has_fulltext()


def test_vectors_of_an_index_without_tables_are_empty(tmp_path: Path) -> None:
    with Store.open(tmp_path / "index.duckdb") as store:
        ids, matrix = store.vectors()
        assert ids.shape == (0,) and matrix.shape[0] == 0
