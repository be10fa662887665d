"""The coordinator counts files reaching the end of the pipeline and knows when a run is done.

It also hears chunks as the embedder gives them vectors, so a watcher sees a big file move.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from gbr.actors.messages import ChunksEmbedded, ChunksQueued, FileDone, WalkFinished
from gbr.core.records import IndexSummary


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    expected: int | None  # None until the walk has finished
    chunks: int
    dropped: int
    elapsed: float
    # Heard only while someone watches (a progress callback is given); 0 otherwise.
    files_queued: int = 0  # files whose chunks the embedder has taken
    chunks_queued: int = 0  # of their chunks, those that needed new vectors
    chunks_embedded: int = 0  # of those, the ones that have them now
    files_indexed: int = 0

    @property
    def rate(self) -> float:
        """Chunks embedded per second since the run started."""
        return self.chunks_embedded / self.elapsed if self.elapsed > 0 else 0.0

    def chunks_left(self) -> float | None:
        """Chunks still to embed: those queued, plus a guess for files not yet queued
        (the average so far per queued file); None until the walk has finished."""
        if self.expected is None:
            return None
        waiting = max(0, self.files_queued - self.files_indexed)  # queued, not yet written
        unqueued = max(0, self.expected - self.done - waiting)
        per_file = self.chunks_queued / self.files_queued if self.files_queued else 0.0
        return max(0, self.chunks_queued - self.chunks_embedded) + unqueued * per_file

    def eta(self) -> float | None:
        """Seconds left at the rate so far, or None while there is no rate to go by."""
        left = self.chunks_left()
        if left is None or self.rate <= 0:
            return None
        return left / self.rate


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
        self._files_queued = self._chunks_queued = self._chunks_embedded = 0

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, FileDone):
            self._record(message)
        elif isinstance(message, WalkFinished):
            self._expected = message.paths
            self.summary.files_seen = message.seen
        elif isinstance(message, ChunksQueued):
            self._files_queued += message.files
            self._chunks_queued += message.chunks
        elif isinstance(message, ChunksEmbedded):
            self._chunks_embedded += message.count
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
                files_queued=self._files_queued,
                chunks_queued=self._chunks_queued,
                chunks_embedded=self._chunks_embedded,
                files_indexed=self.summary.files_indexed,
            )
        )
