"""The coordinator counts files reaching the end of the pipeline and knows when a run is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from gbr.actors.messages import FileDone, WalkFinished
from gbr.core.records import IndexSummary


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    expected: int | None  # None until the walk has finished
    chunks: int
    dropped: int
    elapsed: float


ProgressCallback = Callable[[Progress], None]


class CoordinatorActor(pykka.ThreadingActor):
    """Counts each file once, however often a retry reports it, and signals the end."""

    def __init__(
        self,
        summary: IndexSummary,
        finished: threading.Event,
        progress: ProgressCallback | None = None,
    ) -> None:
        super().__init__()
        self.summary = summary
        self.progress = progress
        self.finished = finished
        self._done: dict[str, FileDone] = {}
        self._expected: frozenset[str] | None = None
        self._started = time.monotonic()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, FileDone):
            self._record(message)
        elif isinstance(message, WalkFinished):
            self._expected = message.paths
            self.summary.files_seen = message.seen
        self._report()
        if self._expected is not None and self._expected <= self._done.keys():
            self.finished.set()
        return None

    def _record(self, done: FileDone) -> None:
        if done.path in self._done:
            return
        self._done[done.path] = done
        s = self.summary
        if done.outcome == "indexed":
            s.files_indexed += 1
            s.chunks += done.chunks
            s.chunks_embedded += done.embedded
            s.chunks_cached += done.cached
        elif done.outcome == "unchanged":
            s.files_unchanged += 1
        elif done.outcome == "removed":
            s.files_removed += 1
        elif done.outcome == "dropped" and done.problem is not None:
            s.files_dropped += 1
            s.dropped.append(done.problem)
        if done.outcome in ("indexed", "unchanged") and done.problem is not None:
            s.files_partial += 1  # indexed in part: some definitions did not parse
            s.partial.append(done.problem)

    def _report(self) -> None:
        if self.progress is None:
            return
        self.progress(
            Progress(
                done=len(self._done),
                expected=len(self._expected) if self._expected is not None else None,
                chunks=self.summary.chunks,
                dropped=self.summary.files_dropped,
                elapsed=time.monotonic() - self._started,
            )
        )
