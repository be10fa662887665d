"""The coordinator alone counts a run, and hands out frozen copies of its summary."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import pykka
import pytest

from gbr.actors.coordinator import CoordinatorActor
from gbr.actors.messages import FileDone, SummaryWanted, WalkFinished
from gbr.core.records import FileProblem, IndexSummary

BASE = IndexSummary(root="/pkg", db="/pkg/.gbr/index.duckdb", reindex_reason="model changed")


@pytest.fixture
def coordinator() -> Iterator[tuple[pykka.ActorRef[CoordinatorActor], threading.Event]]:
    finished = threading.Event()
    ref = CoordinatorActor.start(BASE, finished)
    yield ref, finished
    ref.stop(block=True, timeout=30)


def test_a_summary_handed_out_never_changes_afterwards(
    coordinator: tuple[pykka.ActorRef[CoordinatorActor], threading.Event],
) -> None:
    ref, finished = coordinator
    ref.tell(FileDone("src/a.gleam", "indexed", chunks=3, cached=1))
    first = ref.ask(SummaryWanted(), timeout=30)
    problem = FileProblem("src/b.gleam", "syntax error", "parse_failed", line=1)
    ref.tell(FileDone("src/b.gleam", "dropped", problem=problem))
    ref.tell(FileDone("src/a.gleam", "indexed", chunks=3))  # a retry reports it again
    ref.tell(WalkFinished(frozenset({"src/a.gleam", "src/b.gleam"}), seen=2))
    second = ref.ask(SummaryWanted(), timeout=30)

    assert (first.files_indexed, first.chunks, first.files_dropped, first.dropped) == (1, 3, 0, ())
    assert (second.files_seen, second.files_indexed, second.chunks) == (2, 1, 3)
    assert second.dropped == (problem,) and second.files_dropped == 1
    # What the run knew before the walk is kept; nothing else can change either copy.
    assert (second.root, second.db, second.reindex_reason) == (BASE.root, BASE.db, "model changed")
    assert finished.wait(30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.files_seen = 5  # type: ignore[misc]
