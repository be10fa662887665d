"""The seam: one chooser, records across it, and an in-process index that follows its package."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gbr.access import Found, LocalIndex, LocalSettings, RemoteIndex, choose, chosen
from gbr.access.discovery import DaemonInfo, discovery_path, write_discovery
from gbr.access.requests import AskRequest, SearchRequest
from gbr.core.answer.oracle import Answer, AskOptions
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import StoreError
from gbr.core.rank.search import Filter


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_with_no_daemon_the_chooser_gives_the_local_index_and_clears_a_stale_file(
    tmp_path: Path,
) -> None:
    db = tmp_path / ".gbr" / "index.duckdb"
    db.parent.mkdir()
    local = LocalIndex(
        LocalSettings(tmp_path, db), lambda: pytest.fail("no model is needed"), env=os.environ
    )
    assert choose(local) is local
    write_discovery(DaemonInfo(dead_pid(), "127.0.0.1", 1, str(db), str(tmp_path), 0.0, False))
    heard: list[str] = []
    with chosen(local, on_stale=lambda info, why: heard.append(why)) as index:
        assert index is local and index.via is None
    assert heard and "is gone" in heard[0]
    assert not discovery_path(db).exists()


def test_a_missing_index_is_said_by_whoever_reads_it(tmp_path: Path) -> None:
    local = LocalIndex(
        LocalSettings(tmp_path), lambda: pytest.fail("no model is needed"), env=os.environ
    )
    assert not local.has_index()
    assert local.db == tmp_path / ".gbr" / "index.duckdb"
    with pytest.raises(StoreError, match=r"no index at .*; run `gleambrctl index` first"):
        local.status()


def test_answers_and_outcomes_are_frozen_and_copied_with_replace() -> None:
    answer = Answer("what is an isbn")
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.text = "changed"  # type: ignore[misc]
    cut = dataclasses.replace(answer, text="A book number.", cancelled=True)
    assert (answer.text, answer.cancelled) == ("", False)
    assert Answer.from_dict(cut.as_dict()).as_dict() == cut.as_dict()


def test_found_iterates_its_hits_and_round_trips_the_search_json(
    small_example: Path, model: OnnxEmbedder
) -> None:
    local = LocalIndex(LocalSettings(small_example, keep_open=True), lambda: model, env=os.environ)
    try:
        summary = local.index()
        assert summary.files_indexed == 5
        found = local.search(SearchRequest("check that an ISBN is valid", 3))
        assert [hit.rank for hit in found] == [1, 2, 3] and len(found) == 3
        assert Found.from_dict(found.as_dict()).as_dict() == found.as_dict()
        assert "hint" not in found.as_dict()
        # A filter with no restriction but its test policy is passed as given.
        query = "parse an isbn and check the round trip"
        included = [
            h.path for h in local.search(SearchRequest(query, 40, where=Filter(tests="include")))
        ]
        demoted = [h.path for h in local.search(SearchRequest(query, 40))]
        test_file = "test/isbn_test.gleam"
        assert included.index(test_file) < demoted.index(test_file)
        empty = local.search(SearchRequest("isbn", 3, "bm25", Filter(module="bookshelf/isbnn")))
        assert not empty.hits and empty.hint is not None
        assert empty.hint.startswith("no chunk is in module bookshelf/isbnn; modules here:")
        assert empty.as_dict()["hint"] == empty.hint
    finally:
        local.close()


def test_a_kept_open_index_lets_go_to_index_and_sees_the_new_content(
    small_example: Path, model: OnnxEmbedder
) -> None:
    local = LocalIndex(LocalSettings(small_example, keep_open=True), lambda: model, env=os.environ)
    try:
        local.index()
        assert local.status()["files_ok"] == 5
        added = small_example / "src" / "bookshelf" / "shelf_extra.gleam"
        added.write_text("/// Count the shelves.\npub fn shelf_count_extra() -> Int {\n  3\n}\n")
        assert local.index().files_indexed == 1  # the held file was let go for the writer
        names = [hit.name for hit in local.search(SearchRequest("shelf_count_extra", 5, "bm25"))]
        assert "shelf_count_extra" in names
        dry = local.ask(AskRequest("how are shelves counted?", AskOptions(dry_run=True)))
        assert dry.exit_code == 0 and dry.result is not None and dry.result.chunks
        assert dry.answer["prompt"][0]["role"] == "system"
    finally:
        local.close()


def test_a_remote_index_is_named_by_its_daemon(tmp_path: Path) -> None:
    from gbr.access.client import DaemonClient

    info = DaemonInfo(4242, "127.0.0.1", 9, str(tmp_path / "i.duckdb"), str(tmp_path), 0.0, False)
    remote = RemoteIndex(DaemonClient(info))
    try:
        assert remote.via == "daemon pid 4242 at http://127.0.0.1:9"
        assert remote.root == tmp_path and remote.db == tmp_path / "i.duckdb"
        assert remote.has_index()
    finally:
        remote.close()
