"""The coordinator counts files reaching the end of the pipeline and knows when a run is done.

It also hears chunks as they get their vectors behind the write, so a watcher sees them move.
It alone counts a run: others ask it for the summary (`SummaryWanted`) and get a frozen
copy, so no other thread ever changes what it is counting.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pykka

from gbr.actors.messages import (
    ChunksQueued,
    FileDone,
    SummaryWanted,
    VectorsStored,
    WalkFinished,
)
from gbr.core.records import IndexSummary, Progress, ProgressCallback
from gbr.core.telemetry import log

PROGRESS_EVERY = 1.0  # seconds between index_progress events


class CoordinatorActor(pykka.ThreadingActor):
    """Counts each file once, however often a retry reports it, and signals the end."""

    use_daemon_thread = True  # an interrupted run must not wait for it at exit

    def __init__(
        self,
        base: IndexSummary,
        finished: threading.Event,
        progress: ProgressCallback | None = None,
    ) -> None:
        super().__init__()
        # Swapped, never changed: a summary handed out stays as it was.
        self._summary = base
        self.progress = progress
        self.finished = finished
        self._done: dict[str, FileDone] = {}
        self._expected: frozenset[str] | None = None
        self._started = time.monotonic()
        self._chunks_queued = self._chunks_embedded = 0
        self._logged = 0.0  # run time of the last index_progress event

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, SummaryWanted):
            return self.summary()
        if isinstance(message, FileDone):
            self._record(message)
        elif isinstance(message, WalkFinished):
            self._expected = message.paths
            self._summary = replace(self._summary, files_seen=message.seen)
        elif isinstance(message, ChunksQueued):
            self._chunks_queued += message.chunks
        elif isinstance(message, VectorsStored):
            # Vectors written behind the chunks: counted in the summary here, not per file.
            s = self._summary
            if message.cached:
                self._summary = replace(s, chunks_cached=s.chunks_cached + message.count)
            else:
                self._chunks_embedded += message.count
                self._summary = replace(s, chunks_embedded=s.chunks_embedded + message.count)
        self._report()
        if self._expected is not None and self._expected <= self._done.keys():
            self.finished.set()
        return None

    def summary(self) -> IndexSummary:
        """The run so far, built on the summary the run started with (root, db, reason)."""
        return self._summary

    def _record(self, done: FileDone) -> None:
        if done.path in self._done:
            return
        self._done[done.path] = done
        s = self._summary
        if done.outcome == "indexed":
            s = replace(
                s,
                files_indexed=s.files_indexed + 1,
                chunks=s.chunks + done.chunks,
                chunks_cached=s.chunks_cached + done.cached,
            )
        elif done.outcome == "unchanged":
            s = replace(s, files_unchanged=s.files_unchanged + 1)
        elif done.outcome == "removed":
            s = replace(s, files_removed=s.files_removed + 1)
        elif done.outcome == "dropped" and done.problem is not None:
            s = replace(s, files_dropped=s.files_dropped + 1, dropped=(*s.dropped, done.problem))
        if done.outcome in ("indexed", "unchanged") and done.problem is not None:
            # Indexed in part: some definitions did not parse.
            s = replace(s, files_partial=s.files_partial + 1, partial=(*s.partial, done.problem))
        self._summary = s

    def _report(self) -> None:
        progress = Progress(
            done=len(self._done),
            expected=len(self._expected) if self._expected is not None else None,
            chunks=self._summary.chunks,
            dropped=self._summary.files_dropped,
            elapsed=time.monotonic() - self._started,
            chunks_queued=self._chunks_queued,
            chunks_embedded=self._chunks_embedded,
            files_indexed=self._summary.files_indexed,
        )
        # A long run says how far it got, at most once a second, even with no progress bar.
        if progress.elapsed - self._logged >= PROGRESS_EVERY:
            self._logged = progress.elapsed
            log().info(
                "index_progress",
                done=progress.done,
                expected=progress.expected,
                chunks=progress.chunks,
            )
        if self.progress is not None:
            self.progress(progress)
