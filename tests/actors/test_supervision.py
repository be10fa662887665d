"""Crashes injected into running actors: restarts, retries, dead letters and giving up."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import structlog

from gbr.actors.faults import FaultPlan
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.actors.supervisor import RestartPolicy
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import SupervisionError
from gbr.core.store.facade import Store


def chunk_keys(db: Path) -> Counter[tuple[str, str, str, int]]:
    with Store.open(db, read_only=True) as store:
        rows = store.con.execute("SELECT path, kind, name, part FROM chunks").fetchall()
    return Counter(rows)


@pytest.fixture
def clean_index(small_example: Path, model: OnnxEmbedder, tmp_path: Path) -> Counter:
    """The chunks an undisturbed run produces, to compare crashed runs against."""
    db = tmp_path / "clean.duckdb"
    summary = run_index(IndexOptions(root=small_example, db=db), model)
    assert summary.restarts == 0
    return chunk_keys(db)


def test_crashes_in_embedder_and_writer_lose_and_duplicate_nothing(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path, clean_index: Counter
) -> None:
    # The writer's 3rd message is a file; its 12th comes after every file and ChunksIn
    # (5 files, at most 3 redelivered), so it is a page of vectors.
    faults = FaultPlan(crash_at={"embedder": {2, 4}, "writer": {3, 12}})
    db = tmp_path / "crashed.duckdb"
    with structlog.testing.capture_logs() as events:
        summary = run_index(
            IndexOptions(root=small_example, db=db, batch_chunks=4, faults=faults), model
        )
    assert faults.crashes == Counter({"embedder": 2, "writer": 2})
    assert summary.restarts == 4
    assert summary.dead_letters == 0
    keys = chunk_keys(db)
    assert keys == clean_index  # every chunk present...
    assert max(keys.values()) == 1  # ...exactly once
    restarted = [e for e in events if e["event"] == "actor_restarted"]
    assert Counter(e["actor"] for e in restarted) == {"embedder": 2, "writer": 2}
    assert all("injected crash" in e["error"] for e in restarted)


def test_parser_crash_is_retried(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path, clean_index: Counter
) -> None:
    faults = FaultPlan(crash_at={"parser-0": {1, 3}})
    db = tmp_path / "p.duckdb"
    summary = run_index(IndexOptions(root=small_example, db=db, faults=faults), model)
    assert summary.restarts == 2
    assert chunk_keys(db) == clean_index


def test_a_message_that_crashes_twice_is_dead_lettered_not_lost(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    # The writer's 2nd message crashes, and so does its redelivery (the 3rd message seen).
    faults = FaultPlan(crash_at={"writer": {2, 3}})
    db = tmp_path / "dl.duckdb"
    with structlog.testing.capture_logs() as events:
        summary = run_index(IndexOptions(root=small_example, db=db, faults=faults), model)
    assert summary.dead_letters == 1
    [letter] = [e for e in events if e["event"] == "dead_letter"]
    assert letter["actor"] == "writer"
    dropped = {p.path: p for p in summary.dropped}
    assert dropped[letter["path"]].kind == "dead_letter"
    # Everything else still made it: only the dead-lettered file is missing.
    assert summary.files_indexed + summary.files_dropped == summary.files_seen


def test_a_child_that_always_crashes_fails_the_run_with_a_clear_error(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    options = IndexOptions(
        root=small_example,
        db=tmp_path / "x.duckdb",
        # The parser has a message per file (the embedder one per page, which a second crash
        # dead-letters before the policy is spent).
        parsers=1,
        faults=FaultPlan(always={"parser-0"}),
        policy=RestartPolicy(max_restarts=3, within_seconds=60),
        timeout=120,
    )
    with (
        structlog.testing.capture_logs() as events,
        pytest.raises(SupervisionError, match="the parser-0 crashed 4 times") as info,
    ):
        run_index(options, model)
    assert "injected crash" in str(info.value)
    assert any(e["event"] == "supervisor_gave_up" for e in events)
