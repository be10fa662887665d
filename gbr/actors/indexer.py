"""The Indexer actor: the daemon's single road to the index pipeline.

DuckDB takes one writer per file, and two runs at once would race on the same rows, so
every run (the watcher's batches of changed paths, a full pass asked for over HTTP) goes
through this one actor's inbox and runs one at a time. Messages arrive by `tell`: a crash
while handling one is a real actor death, and the supervisor starts a new Indexer and
hands it the message again (once; a second crash dead-letters it, and the daemon answers
a waiting caller with the error).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from gbr.actors.faults import FaultPlan
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor
from gbr.core.errors import DaemonError, GbrError
from gbr.core.records import IndexSummary
from gbr.core.telemetry import log

# Runs the pipeline over these relative paths (None: the whole tree) and returns its summary;
# the kind is "changes" or "full", and the time is when the watcher saw the changes.
RunIndex = Callable[[frozenset[str] | None, str, float | None], IndexSummary]


@dataclass(frozen=True, slots=True)
class IndexChanges:
    """Indexer: re-walk these relative paths (files, or folders), which changed or vanished."""

    paths: frozenset[str]
    seen_at: float  # monotonic time the watcher delivered them, for the lag metric


@dataclass(frozen=True, slots=True)
class IndexEverything:
    """Indexer: a full pass; its summary, or its error, resolves `reply` when one waits."""

    reason: str = "requested"
    reply: Future[IndexSummary] | None = field(default=None, compare=False)


class IndexerActor(SupervisedActor):
    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        run: RunIndex,
        faults: FaultPlan | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.run = run
        self._stopping = stopping or threading.Event()

    def handle(self, message: Any) -> None:
        if self._stopping.is_set():
            # Shutting down: queued work is dropped (the next start catches up with it).
            if isinstance(message, IndexEverything):
                _fail(message.reply, DaemonError("the daemon is shutting down; start it again"))
            return
        self.check_fault(message)
        if isinstance(message, IndexChanges):
            try:
                self.run(message.paths, "changes", message.seen_at)
            except GbrError as exc:
                # The next change or full pass retries these files; the daemon lives on.
                log().error("index_batch_failed", error=str(exc), paths=len(message.paths))
        elif isinstance(message, IndexEverything):
            try:
                summary = self.run(None, "full", None)
            except GbrError as exc:
                log().error("index_pass_failed", error=str(exc), reason=message.reason)
                _fail(message.reply, exc)
                return
            if message.reply is not None and not message.reply.done():
                message.reply.set_result(summary)


def _fail(reply: Future[IndexSummary] | None, error: BaseException) -> None:
    if reply is not None and not reply.done():
        reply.set_exception(error)


def start_indexer(
    supervisor: Supervisor,
    run: RunIndex,
    faults: FaultPlan | None = None,
    stopping: threading.Event | None = None,
) -> ChildRef:
    return supervisor.start_child(
        "indexer",
        lambda: IndexerActor.start(
            supervisor, "indexer", run=run, faults=faults, stopping=stopping
        ),
    )
