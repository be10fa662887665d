"""The Indexer actor: the daemon's single road to the index pipeline.

DuckDB takes one writer per file, and two runs at once would race on the same rows, so
every run (the watcher's batches of changed paths, a full pass asked for over HTTP) goes
through this one actor's inbox and runs one at a time. Messages arrive by `tell`: a crash
while handling one is a real actor death, and the supervisor starts a new Indexer and
hands it the message again (once; a second crash dead-letters it, and the daemon answers
a waiting caller with the error).

A run whose write fails (StoreWriteError: no permission, disk full, no file descriptors)
is not the batch's fault, and dropping it would lose the saves it carries. Its paths are
kept and run again after a backoff (1 s, doubling up to a minute) until a write succeeds;
new changes join them. Meanwhile `report` says why the index is behind, for `/health`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from gbr.actors.faults import FaultPlan
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor
from gbr.core.errors import DaemonError, GbrError, IndexCorruptError, StoreWriteError
from gbr.core.records import IndexSummary
from gbr.core.telemetry import log

# Runs the pipeline over these relative paths (None: the whole tree) and returns its summary;
# the kind is "changes" or "full", and the time is when the watcher saw the changes.
RunIndex = Callable[[frozenset[str] | None, str, float | None], IndexSummary]
# Hears why the index is behind (writes failing, changes kept), and None once it caught up.
Report = Callable[[str | None], None]
MAX_BACKOFF = 60.0


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


@dataclass(frozen=True, slots=True)
class RetryKept:
    """Indexer: try again the changes kept after a failed write."""


@dataclass
class _Kept:
    """Work whose write failed, waiting for its retry; it outlives a restart (see unfinished)."""

    paths: set[str] = field(default_factory=set)
    full: bool = False
    seen_at: float | None = None  # the oldest save among them, for the lag metric
    attempts: int = 0
    timer: threading.Timer | None = None


class IndexerActor(SupervisedActor):
    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        run: RunIndex,
        faults: FaultPlan | None = None,
        stopping: threading.Event | None = None,
        report: Report | None = None,
        backoff: float = 1.0,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.run = run
        self._stopping = stopping or threading.Event()
        self.report = report
        self.backoff = backoff
        self._kept = _Kept()

    def handle(self, message: Any) -> None:
        if self._stopping.is_set():
            # Shutting down: queued work is dropped (the next start catches up with it).
            if isinstance(message, IndexEverything):
                _fail(message.reply, DaemonError("the daemon is shutting down; start it again"))
            return
        self.check_fault(message)
        kept = self._kept
        if isinstance(message, RetryKept):
            if kept.full:
                self._pass(IndexEverything("retry after a failed write"))
            elif kept.paths:
                self._changes(frozenset(), None)
        elif isinstance(message, IndexChanges):
            self._changes(message.paths, message.seen_at)
        elif isinstance(message, IndexEverything):
            self._pass(message)

    def _changes(self, paths: frozenset[str], seen_at: float | None) -> None:
        kept = self._kept
        if kept.full:  # a full pass is owed anyway; it covers these paths too
            self._keep(None, seen_at)
            return
        todo = frozenset(paths | kept.paths)
        first = min((t for t in (seen_at, kept.seen_at) if t is not None), default=None)
        try:
            self.run(todo, "changes", first)
        except StoreWriteError as exc:
            self._keep(todo, first, exc)
        except GbrError as exc:
            # The next change or full pass retries these files; the daemon lives on.
            log().error("index_batch_failed", error=str(exc), paths=len(todo))
            self._report_damage(exc)
        else:
            self._caught_up()

    def _pass(self, message: IndexEverything) -> None:
        try:
            summary = self.run(None, "full", None)
        except StoreWriteError as exc:
            self._keep(None, None, exc)
            _fail(message.reply, exc)
            return
        except GbrError as exc:
            log().error("index_pass_failed", error=str(exc), reason=message.reason)
            self._report_damage(exc)
            _fail(message.reply, exc)
            return
        self._caught_up()
        if message.reply is not None and not message.reply.done():
            message.reply.set_result(summary)

    def _report_damage(self, error: GbrError) -> None:
        """A damaged index file fails every run until it is rebuilt: /health says so, with
        the rebuild that fixes it (a run that succeeds later clears it)."""
        if isinstance(error, IndexCorruptError) and self.report is not None:
            self.report(str(error))

    def _keep(
        self,
        paths: frozenset[str] | None,
        seen_at: float | None,
        error: BaseException | None = None,
    ) -> None:
        """Hold the work (None: a full pass) and schedule its retry."""
        kept = self._kept
        if paths is None:
            kept.full, kept.paths = True, set()
        else:
            kept.paths |= paths
        if kept.seen_at is None:
            kept.seen_at = seen_at
        if error is None:
            return  # joined work already waiting for its retry
        kept.attempts += 1
        delay = min(self.backoff * 2 ** (kept.attempts - 1), MAX_BACKOFF)
        what = "a full pass" if kept.full else f"{len(kept.paths)} changed paths"
        reason = f"index writes are failing; {what} kept, retried in {delay:g} s: {error}"
        log().error("index_batch_kept", error=str(error), retry_in=delay, work=what)
        if self.report is not None:
            self.report(reason)
        self._schedule(delay)

    def _schedule(self, delay: float) -> None:
        if self._kept.timer is not None:
            self._kept.timer.cancel()
        child = self.child()

        def retry() -> None:
            if not self._stopping.is_set():
                with contextlib.suppress(GbrError):
                    child.tell(RetryKept())

        timer = threading.Timer(delay, retry)
        timer.daemon = True
        timer.start()
        self._kept.timer = timer

    def _caught_up(self) -> None:
        """Nothing is kept after a run that wrote, so no problem is left to report. The
        report is cleared even when this incarnation failed no write: one restarted after
        a crash inherits its predecessor's kept work, and /health its problem."""
        kept = self._kept
        if kept.attempts:
            log().info("index_caught_up", attempts=kept.attempts)
        if self.report is not None:
            self.report(None)
        if kept.timer is not None:
            kept.timer.cancel()
        self._kept = _Kept()

    def unfinished(self) -> list[Any]:
        """Kept work goes to the next incarnation, as changes still to index."""
        kept = self._kept
        if kept.timer is not None:
            kept.timer.cancel()
        if kept.full:
            return [IndexEverything("retry after a failed write")]
        if kept.paths:
            return [IndexChanges(frozenset(kept.paths), kept.seen_at or 0.0)]
        return []

    def on_stop(self) -> None:
        if self._kept.timer is not None:
            self._kept.timer.cancel()


def _fail(reply: Future[IndexSummary] | None, error: BaseException) -> None:
    if reply is not None and not reply.done():
        reply.set_exception(error)


def start_indexer(
    supervisor: Supervisor,
    run: RunIndex,
    faults: FaultPlan | None = None,
    stopping: threading.Event | None = None,
    report: Report | None = None,
) -> ChildRef:
    return supervisor.start_child(
        "indexer",
        lambda: IndexerActor.start(
            supervisor, "indexer", run=run, faults=faults, stopping=stopping, report=report
        ),
    )
