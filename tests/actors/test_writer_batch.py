"""The writer swaps the files queued behind each other in one transaction, and a file whose
rows the store refuses costs only itself.

Real grammar, model and DuckDB file, with the real writer, supervisor and coordinator.
The first commit is held at a gate (a fault plan's commit hook, as the drills use), so the
files sent meanwhile are queued in the writer's inbox when it is free again.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np

from gbr.actors.coordinator import CoordinatorActor
from gbr.actors.faults import FaultPlan
from gbr.actors.messages import FileEmbedded, FinishRun, SummaryWanted
from gbr.actors.stages import WriterActor
from gbr.actors.supervisor import Supervisor
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import CHUNKER_VERSION, chunk_file, new_parser
from gbr.core.records import IndexSummary, SourceFile
from gbr.core.store.facade import Store
from gbr.core.store.indexing import prepare_chunks
from tests.core.test_store import source

WAIT = 60.0  # bound on every wait: a hung writer fails the test instead of the run


class GatedCommits(FaultPlan):
    """Counts commits and holds the first one until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.commits = 0

    def check_commit(self, paths: object = ()) -> None:
        self.commits += 1
        if self.commits == 1:
            assert self.gate.wait(WAIT)


def message(src: SourceFile, model: OnnxEmbedder) -> FileEmbedded:
    chunks = chunk_file(src, new_parser(), model.count_tokens)
    assert isinstance(chunks, list)
    return FileEmbedded(src, tuple(prepare_chunks(chunks, model)), known=False)


def gleam(name: str) -> SourceFile:
    text = f"/// {name}, documented.\npub fn {name}(x: Int) -> Int {{\n  x + 1\n}}\n"
    return source(text, f"src/{name}.gleam")


def write_all(
    db: Path, model: OnnxEmbedder, messages: list[FileEmbedded]
) -> tuple[IndexSummary, GatedCommits]:
    with Store.open(db) as store:
        store.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim)
    plan = GatedCommits()
    finished = threading.Event()
    coordinator = CoordinatorActor.start(IndexSummary(root="r", db=str(db)), finished)
    supervisor = Supervisor()
    slots = threading.Semaphore(len(messages))
    try:
        writer = supervisor.start_child(
            "writer",
            lambda: WriterActor.start(
                supervisor,
                "writer",
                open_store=lambda: Store.open(db),
                coordinator=coordinator,
                slots=slots,
                faults=plan,
            ),
        )
        for m in messages:
            assert slots.acquire(timeout=WAIT)
            writer.tell(m)
        plan.gate.set()
        writer.ask(FinishRun("{}"), timeout=WAIT)
        summary = coordinator.ask(SummaryWanted(), timeout=WAIT)
    finally:
        supervisor.stop_all()
        coordinator.stop()
    assert isinstance(summary, IndexSummary)
    return summary, plan


def test_files_queued_behind_a_write_share_one_transaction(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    files = [gleam(n) for n in ("alpha", "bravo", "charlie", "delta")]
    summary, plan = write_all(tmp_path / "i.duckdb", model, [message(f, model) for f in files])
    assert (summary.files_indexed, summary.chunks, summary.files_dropped) == (4, 4, 0)
    # The first file alone, held at the gate; the three queued meanwhile in one commit.
    assert plan.commits == 2
    with Store.open(tmp_path / "i.duckdb", read_only=True) as store:
        assert store.counts()["files_ok"] == 4
        assert store.coverage() == (0, 4)  # the vectors come behind, from the embedder


def test_a_file_the_store_refuses_is_dropped_alone_and_the_batch_is_written(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    good = [message(gleam(n), model) for n in ("alpha", "bravo", "delta")]
    bad = message(gleam("charlie"), model)
    # A vector of the wrong size: DuckDB refuses the batch's INSERT as a whole.
    wrong = tuple(replace(c, vector=np.ones(3, dtype=np.float32)) for c in bad.chunks)
    summary, _ = write_all(
        tmp_path / "i.duckdb", model, [good[0], good[1], replace(bad, chunks=wrong), good[2]]
    )
    assert (summary.files_indexed, summary.files_dropped) == (3, 1)
    (problem,) = summary.dropped
    assert problem.path == "src/charlie.gleam" and problem.kind == "write_failed"
    assert problem.reason.startswith("the writer failed on this file (")
    with Store.open(tmp_path / "i.duckdb", read_only=True) as store:
        paths = store.con.execute("SELECT DISTINCT path FROM chunks ORDER BY path").fetchall()
        assert paths == [("src/alpha.gleam",), ("src/bravo.gleam",), ("src/delta.gleam",)]
        assert [i.path for i in store.failed_files()] == ["src/charlie.gleam"]
