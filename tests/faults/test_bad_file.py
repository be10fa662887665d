"""Issue 15, item 3 (pipeline): one bad file is dropped alone, and `status` says why.

On main, a `.gleam` file named `bad\\xffname.gleam` crashed the embedder twice on a batch
of several files, and all of them went to the dead letters; `status` explained only the
syntax errors, so its count disagreed with the run's summary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import structlog

from gbr.actors.faults import FaultPlan
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.facade import Store
from tests.faults.conftest import ctl

BAD_NAME = os.fsdecode(b"src/bad\xffname.gleam")


def status_dropped(db: Path) -> dict[str, dict]:
    with Store.open(db, read_only=True) as store:
        return {row.path: row.as_dict() for row in store.failed_files()}


def test_a_file_named_with_invalid_utf8_is_dropped_alone(
    small_example: Path, tmp_path: Path
) -> None:
    """A real CLI run over a real bad name: only that file is dropped, and status agrees."""
    (small_example / BAD_NAME).write_bytes(b"pub fn bad_name() -> Int {\n  1\n}\n")
    done = ctl("index", ".", "--json", cwd=small_example, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["files_indexed"] == 5  # every valid file
    assert summary["dead_letters"] == 0
    # The walker skips the name with its bytes escaped, so JSON, status and events agree.
    assert [d["path"] for d in summary["dropped"]] == ["src/bad\\xffname.gleam"]
    report = ctl("status", "--json", cwd=small_example, home=tmp_path / "home")
    status = json.loads(report.stdout)
    assert status["files_failed"] == summary["files_dropped"] == 1
    [row] = status["dropped"]
    assert row["path"] == "src/bad\\xffname.gleam" and row["error"]


def test_a_poisonous_file_in_a_cross_file_batch_costs_only_itself(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """The drill crashes the writer whenever its transaction holds isbn.gleam. Files that
    queue up share one transaction, which is split to find the culprit; a file written
    alone crashes the writer twice and is dead-lettered. Either way only it is lost."""
    guilty = "src/bookshelf/isbn.gleam"
    faults = FaultPlan(poison={"writer": {guilty}})
    db = tmp_path / "poison.duckdb"
    with structlog.testing.capture_logs() as events:
        summary = run_index(IndexOptions(root=small_example, db=db, faults=faults), model)
    assert summary.files_indexed == 4 and summary.files_dropped == 1
    [problem] = summary.dropped
    assert problem.path == guilty
    assert "injected crash in writer on src/bookshelf/isbn.gleam" in problem.reason
    if problem.kind == "write_failed":
        assert any(e["event"] == "batch_split" for e in events)
    else:
        assert problem.kind == "dead_letter" and summary.dead_letters == 1
    dropped = status_dropped(db)
    assert list(dropped) == [guilty] and dropped[guilty]["error"] == problem.reason
    with Store.open(db, read_only=True) as store:
        assert store.counts()["files_ok"] == 4


def test_a_dead_lettered_file_is_explained_by_status_too(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """The writer crashes twice on one file: it is dropped, and the store records why."""
    faults = FaultPlan(crash_at={"writer": {2, 3}})
    db = tmp_path / "dl.duckdb"
    summary = run_index(IndexOptions(root=small_example, db=db, faults=faults), model)
    assert summary.dead_letters == 1
    [problem] = summary.dropped
    assert problem.kind == "dead_letter"
    dropped = status_dropped(db)
    assert list(dropped) == [problem.path]
    assert "crashed twice" in dropped[problem.path]["error"]
