"""The real daemon and its watcher, with real edits that leave a file parsing only in part.

What a user typing gets (see Store.replace_file): while a file that was indexed cleanly is
broken, the whole last good version stays searchable, flagged stale, and `status` lists the
file as partial; once it parses again, the new version replaces it. A file that never parsed
cleanly gives the definitions that parse intact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import copy_small
from tests.core.test_chunker_partial import BROKEN_MIDDLE
from tests.daemon.conftest import RunningDaemon, clean_env, run_ctl, start_daemon, wait_until

MEMBER = "src/bookshelf/member.gleam"
DRAFTS = "src/bookshelf/drafts.gleam"
HALF_TYPED = "pub fn half_typed(member: Member) -> Int {\n  let fines = [1, 2,, 3]\n  0\n}\n\n"
CAN_BORROW_DOC = "/// Decide whether the member may take out a new loan"
NEW_HELPER = "\npub fn brand_new_helper() -> Int {\n  7\n}\n"
# Generous: a first pass embeds with the real model on a shared, busy machine.
PATIENCE = 180.0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    base = tmp_path_factory.mktemp("partial")
    root = copy_small(base / "small")
    running = start_daemon(root, "--debounce-ms", "100", env=clean_env(base / "home"))
    running.wait_idle(PATIENCE)
    yield running
    running.stop()


def partial_item(daemon: RunningDaemon, path: str) -> dict[str, Any] | None:
    return next((p for p in daemon.status()["partial"] if p["path"] == path), None)


def names_in(daemon: RunningDaemon, query: str, path: str) -> set[str]:
    found = daemon.search(query, mode="bm25", path=path, k=50)["results"]
    return {r["name"] for r in found}


def events(daemon: RunningDaemon, name: str) -> list[dict[str, Any]]:
    lines = (daemon.db.parent / "events.jsonl").open()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_a_file_broken_mid_edit_keeps_its_last_good_version(daemon: RunningDaemon) -> None:
    member = daemon.root / MEMBER
    good = member.read_text()
    before = daemon.search("loan limit borrow", mode="bm25", path=MEMBER, k=50)
    assert before["results"]
    # A half-typed function above `can_borrow` (and its doc), a finished new one at the end.
    at = good.index(CAN_BORROW_DOC)
    member.write_text(good[:at] + HALF_TYPED + good[at:] + NEW_HELPER)

    item = wait_until(
        lambda: partial_item(daemon, MEMBER), "member.gleam to be listed as partial", PATIENCE
    )
    assert item["error_kind"] == "parse_partial"
    assert "not indexed" in item["error"] and "line" in item["error"]
    # The whole last good version is kept, as one consistent snapshot of the file.
    assert item["stale_chunks"] == item["chunks"] > 0
    assert daemon.search("loan limit borrow", mode="bm25", path=MEMBER, k=50) == before
    assert "brand_new_helper" not in names_in(daemon, "brand_new_helper", MEMBER)
    status = daemon.status()
    assert status["files_partial"] == 1 and status["files_failed"] == 0
    [event] = [e for e in events(daemon, "parse_partial") if e["file"] == MEMBER]
    row = good[:at].count("\n") + 1  # the line `half_typed` starts on
    assert event["dropped_lines"] == [[row, row + 3]]
    assert (event["line"], event["excerpt"]) == (row + 1, "let fines = [1, 2,, 3]")
    assert event["stale_chunks_kept"] == item["chunks"]

    # Finished typing: the new version replaces the old one, and nothing is partial.
    member.write_text(good + NEW_HELPER)
    wait_until(
        lambda: "brand_new_helper" in names_in(daemon, "brand_new_helper", MEMBER),
        "the finished edit to be searchable",
        PATIENCE,
    )
    status = daemon.wait_idle(PATIENCE)
    assert status["partial"] == [] and status["files_partial"] == 0
    assert status["stale_chunks"] == 0


def test_a_new_file_that_parses_in_part_gives_its_intact_definitions(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    (daemon.root / DRAFTS).write_text(BROKEN_MIDDLE)
    item = wait_until(
        lambda: partial_item(daemon, DRAFTS), "drafts.gleam to be listed as partial", PATIENCE
    )
    assert item["chunks"] == 3 and item["stale_chunks"] == 0
    assert "lines 10-14 not indexed" in item["error"]
    assert names_in(daemon, "int", DRAFTS) == {"bookshelf/drafts", "first", "last"}

    env = clean_env(tmp_path / "home")
    status = run_ctl("status", cwd=daemon.root, env=env)
    assert status.returncode == 0, status.stderr
    assert f"partial {DRAFTS}: syntax error at line 12" in status.stdout

    strict = run_ctl("index", str(daemon.root), "--strict", cwd=daemon.root, env=env)
    assert strict.returncode == 1
    errors = [line for line in strict.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --strict: 0 files dropped, 1 only partly parsed; fix the files listed above, "
        "or index without --strict"
    ]
    (daemon.root / DRAFTS).unlink()
    wait_until(lambda: partial_item(daemon, DRAFTS) is None, "drafts.gleam to be gone", PATIENCE)
