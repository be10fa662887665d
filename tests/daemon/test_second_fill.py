"""A quiet daemon reads every node through the second model ahead of the searches.

Real parts: the bge model, the shared embed cache (SQLite), the daemon in this process
over the small example.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from gbr.core.embed.cache import EmbedCache
from gbr.core.embed.cache_config import cache_config
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunk_text import embed_key
from gbr.core.rank.second_opinion import (
    FILL_BATCH,
    MODEL_ID,
    SecondOpinion,
    fill,
    second_model_files,
)
from gbr.core.records import NO_FILTER, Hit
from gbr.daemon.filler import FILL_ENV, QUIET_SECONDS, node_pages, quiet_seconds
from gbr.daemon.service import Daemon, DaemonConfig
from tests.daemon.conftest import wait_until

BOUND = 180.0  # seconds for a pass and a fill of the small example on a busy machine


def test_the_quiet_time_is_read_from_the_environment() -> None:
    assert quiet_seconds({}) == QUIET_SECONDS
    assert quiet_seconds({FILL_ENV: "0"}) == 0.0
    assert quiet_seconds({FILL_ENV: "2.5"}) == 2.5
    assert quiet_seconds({FILL_ENV: "soon"}) == QUIET_SECONDS  # a warning, then the default
    for off in ("off", "OFF", "no", "false"):
        assert quiet_seconds({FILL_ENV: off}) is None


def test_a_fill_stops_between_two_batches_when_asked() -> None:
    files = second_model_files({})
    assert files is not None
    stage = SecondOpinion(files)
    hit = Hit(
        rank=0, path="src/a.gleam", module="a", name="f", kind="function", start_line=1,
        end_line=2, score=1.0, text="", signature="pub fn f() -> Int", doc="",
    )  # fmt: skip
    hits = [replace(hit, name=f"f{i}", text=f"pub fn f{i}() -> Int {{ {i} }}") for i in range(20)]
    calls = iter([True, True, False])
    assert fill(stage, [hits], lambda: next(calls)) is None
    assert len(stage._memo) == 2 * FILL_BATCH  # two batches read, the third never started
    assert fill(stage, [hits[:5], hits[5:]], lambda: True) == 20


def test_a_quiet_daemon_fills_every_node_and_its_searches_then_embed_nothing(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    env = {**os.environ, FILL_ENV: "0"}
    config = DaemonConfig(root=small_example, db=tmp_path / "index.duckdb", env=env)
    daemon = Daemon(config, model)
    daemon.open()
    try:
        daemon.start_watching()
        assert daemon.filler is not None
        wait_until(daemon.filler.filled.is_set, "the second opinion's fill", BOUND)
        searcher = daemon._current_searcher()
        second = searcher.ranking.second
        assert second is not None
        keys = {embed_key(MODEL_ID, second.reads(h)) for page in node_pages(searcher) for h in page}
        assert len(keys) > 20
        cache = EmbedCache(cache_config(env), 384)  # type: ignore[arg-type]
        try:
            assert set(cache.lookup(list(keys))) == keys  # in the shared cache, for the CLI too
        finally:
            cache.close()
        held = len(second._memo)
        for query in ("check that an ISBN is valid", "lend a book to a member until a date"):
            assert daemon.search(query, 10, "hybrid", NO_FILTER).hits
        assert len(second._memo) == held  # every hit re-scored was read already
    finally:
        daemon.close()
    assert not daemon.filler._thread.is_alive()


def test_off_means_no_fill(small_example: Path, model: OnnxEmbedder, tmp_path: Path) -> None:
    env = {**os.environ, FILL_ENV: "off"}
    daemon = Daemon(DaemonConfig(root=small_example, db=tmp_path / "i.duckdb", env=env), model)
    daemon.open()
    try:
        assert daemon.filler is None
    finally:
        daemon.close()
