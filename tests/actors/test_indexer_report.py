"""The daemon's Indexer: the problem it reports to /health ends when its work is written."""

from __future__ import annotations

import threading
import time
from typing import Any

from gbr.actors.indexer import IndexChanges, IndexerActor
from gbr.actors.supervisor import Supervisor
from gbr.core.errors import StoreWriteError

BOUND = 30.0  # seconds; each step here takes milliseconds


class Runs:
    """A pipeline stand-in whose calls fail as scripted: the actor only routes its result."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[frozenset[str] | None] = []
        self.done = threading.Event()

    def __call__(self, only: frozenset[str] | None, kind: str, seen_at: float | None) -> Any:
        self.calls.append(only)
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        self.done.set()
        return None


def reported_after(runs: Runs, reports: list[str | None]) -> list[str | None]:
    supervisor = Supervisor()
    ref = supervisor.start_child(
        "indexer",
        lambda: IndexerActor.start(
            supervisor, "indexer", run=runs, report=reports.append, backoff=0.01
        ),
    )
    try:
        ref.tell(IndexChanges(frozenset({"src/a.gleam"}), time.time()))
        assert runs.done.wait(BOUND), f"the kept work was never written: {runs.calls}"
        deadline = time.monotonic() + BOUND
        while reports and reports[-1] is not None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        supervisor.stop_all()
    return reports


def test_a_failed_write_is_reported_and_cleared_once_its_retry_writes() -> None:
    runs = Runs(StoreWriteError("disk full"))
    reports = reported_after(runs, [])
    assert reports[0] is not None and "disk full" in reports[0]
    assert reports[-1] is None
    assert runs.calls == [frozenset({"src/a.gleam"})] * 2


def test_a_kept_batch_written_after_the_indexer_restarted_clears_the_report() -> None:
    """The restarted Indexer starts with no attempts of its own, but the problem its
    predecessor reported is still on /health until someone clears it."""
    runs = Runs(StoreWriteError("disk full"), RuntimeError("a bug in the retry"))
    reports = reported_after(runs, [])
    assert any(r is not None and "disk full" in r for r in reports)
    assert reports[-1] is None, reports
    assert runs.calls[-1] == frozenset({"src/a.gleam"})
