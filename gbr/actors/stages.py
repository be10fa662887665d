"""The pipeline's actors: thin shells that receive, call gbr.core, and send on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pykka

from gbr.actors.faults import FaultPlan
from gbr.actors.messages import (
    ChunksEmbedded,
    ChunksQueued,
    FileDone,
    FileEmbedded,
    FileFailed,
    FileFound,
    FileParsed,
    FilesRemoved,
    FinishRun,
    ScanTree,
    WalkFinished,
)
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor, describe
from gbr.core.chunk_text import DEFAULT_EMBED_FORMAT
from gbr.core.chunker import ChunkLimits, new_parser
from gbr.core.embedder import OnnxEmbedder
from gbr.core.errors import StoreWriteError
from gbr.core.graph.build import chunk_with_graph
from gbr.core.indexing import SharedVectors, embed_chunks
from gbr.core.records import FileProblem, FileState, PartialFile
from gbr.core.store import Store
from gbr.core.telemetry import log
from gbr.core.walker import Scope, WalkOptions, read_file, walk

StoreFactory = Callable[[], Store]
WriteFailed = Callable[[StoreWriteError], None]
LARGE_FILE = 1_000_000  # bytes; chunking a file this big is announced in telemetry


class _Stage(SupervisedActor):
    """A pipeline stage: every message it takes is open to a crash drill."""

    # Python's exit joins non-daemon threads: a stage busy with a 10 MB file held up an
    # interrupted run for minutes. Normal runs stop every stage explicitly.
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        self._in_hand = message  # a drilled crash salvages it, like any other
        self.check_fault(message)
        return super().on_receive(message)


def log_problem(problem: FileProblem, **extra: Any) -> None:
    """The structured event for a dropped or partial file, with where and what.

    `parse_partial` also lists the line ranges left out, so no line is lost unsaid.
    """
    event = problem.kind if problem.kind in ("parse_failed", "parse_partial") else "file_dropped"
    if problem.dropped_lines:
        extra["dropped_lines"] = [list(r) for r in problem.dropped_lines]
    log().warning(
        event,
        file=problem.path,
        kind=problem.kind,
        line=problem.line,
        column=problem.column,
        excerpt=problem.excerpt,
        reason=problem.reason,
        **extra,
    )


class WalkerActor(_Stage):
    """Finds files, skips unchanged ones by hash, and keeps a bounded number in flight."""

    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        root: Path,
        options: WalkOptions,
        states: dict[str, FileState],
        parsers: Sequence[ChildRef],
        writer: ChildRef,
        coordinator: pykka.ActorRef[Any],
        slots: threading.Semaphore,
        abort: threading.Event,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.root, self.options, self.states = root, options, states
        self.parsers, self.writer, self.coordinator = parsers, writer, coordinator
        self.slots, self.abort = slots, abort

    def handle(self, message: Any) -> None:
        if isinstance(message, ScanTree):
            self._scan()

    def _scan(self) -> None:
        paths: set[str] = set()
        seen = 0
        turn = 0
        for item in walk(self.root, self.options):
            if self.abort.is_set():
                return
            paths.add(item.path)
            seen += 1
            if isinstance(item, FileProblem):
                self._send(self.writer, FileFailed(item))
                continue
            source = read_file(item, self.options.max_bytes)
            if isinstance(source, FileProblem):
                self._send(self.writer, FileFailed(source))
                continue
            state = self.states.get(source.path)
            if (
                state is not None
                and state.status in ("ok", "partial")
                and state.content_hash == source.content_hash
            ):
                # An unchanged partial file is still partial: the summary says so again.
                partial = (
                    FileProblem(source.path, state.error, "parse_partial")
                    if state.status == "partial"
                    else None
                )
                self.coordinator.tell(FileDone(source.path, "unchanged", problem=partial))
                continue
            self._send(self.parsers[turn % len(self.parsers)], FileFound(source))
            turn += 1
        scope = Scope(self.options.only) if self.options.only is not None else None
        # A restricted run speaks only for its scope: a listed path that is no longer found
        # (deleted, or now ignored) is removed; files outside the scope are left alone.
        gone = tuple(
            sorted(p for p in set(self.states) - paths if scope is None or scope.covers(p))
        )
        if gone:
            self.writer.tell(FilesRemoved(gone))
        self.coordinator.tell(WalkFinished(frozenset(paths | set(gone)), seen))

    def _send(self, target: ChildRef, message: Any) -> None:
        """Wait for a free slot first: back-pressure keeps memory flat on huge trees."""
        while not self.slots.acquire(timeout=0.2):
            if self.abort.is_set():
                return
        target.tell(message)


class ParserActor(_Stage):
    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        embedder: ChildRef,
        writer: ChildRef,
        count_tokens: Callable[[str], int],
        limits: ChunkLimits,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.embedder, self.writer = embedder, writer
        self.count_tokens, self.limits = count_tokens, limits
        self.parser = new_parser()

    def handle(self, message: Any) -> None:
        if isinstance(message, FileFound):
            if message.source.size >= LARGE_FILE:
                log().info("large_file_chunking", file=message.path, bytes=message.source.size)
            source = message.source
            result, graph = chunk_with_graph(source, self.parser, self.count_tokens, self.limits)
            if isinstance(result, FileProblem):
                self.writer.tell(FileFailed(result, source))
            elif isinstance(result, PartialFile):
                self.embedder.tell(FileParsed(source, result.chunks, result.problem, graph))
            else:
                self.embedder.tell(FileParsed(source, tuple(result), graph=graph))


class EmbedderActor(_Stage):
    """Batches chunks across files: it runs the model when the batch is full or the inbox idle."""

    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        model: OnnxEmbedder,
        open_store: StoreFactory,
        writer: ChildRef,
        batch_chunks: int = 256,
        embed_format: str = DEFAULT_EMBED_FORMAT,
        faults: FaultPlan | None = None,
        progress_to: pykka.ActorRef[Any] | None = None,
        shared: SharedVectors | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.model, self.open_store, self.writer = model, open_store, writer
        self.shared = shared  # vectors kept beyond this index (gbr.core.embed_cache)
        # The coordinator, when someone watches progress: it hears chunks as they get vectors.
        self.progress_to = progress_to
        self.batch_chunks, self.embed_format = batch_chunks, embed_format
        self._pending: list[FileParsed] = []
        self._store: Store | None = None

    def start_up(self) -> None:
        self._store = self.open_store()

    def on_start_failed(self) -> None:
        self._close()

    def on_stop(self) -> None:
        self._close()

    def on_failure(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._close()
        super().on_failure(exc_type, exc_value, traceback)

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def unfinished(self) -> list[Any]:
        return list(self._pending)

    def handle(self, message: Any) -> None:
        if isinstance(message, FileParsed):
            self._pending.append(message)
        pending_chunks = sum(len(p.chunks) for p in self._pending)
        if pending_chunks >= self.batch_chunks or self.actor_inbox.empty():
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        batch = self._pending
        try:
            out: list[FileEmbedded | FileFailed] = list(self._embed(batch))
        except Exception as exc:
            out = self._embed_apart(batch, exc)
        self._pending = []
        for message in out:
            self.writer.tell(message)

    def _embed(self, batch: list[FileParsed]) -> list[FileEmbedded]:
        assert self._store is not None
        if self._faults is not None:
            self._faults.check_files(self._child_name, (p.path for p in batch))
        chunks = [c for p in batch for c in p.chunks]
        stored, cached = embed_chunks(
            chunks,
            self.model,
            self._store.cached_vectors,
            self.embed_format,
            on_progress=self._reporter(len(self._pending)),
            shared=self.shared,
        )
        out = []
        offset = 0
        for parsed in batch:
            end = offset + len(parsed.chunks)
            hits = sum(cached[offset:end])
            mine = tuple(stored[offset:end])
            offset = end
            out.append(
                FileEmbedded(
                    parsed.source, mine, len(mine) - hits, hits, parsed.partial, parsed.graph
                )
            )
        return out

    def _embed_apart(
        self, batch: list[FileParsed], error: Exception
    ) -> list[FileEmbedded | FileFailed]:
        """A batch mixes files, so one file's bad input must not cost the others: run them
        again one by one, and drop only a file that fails on its own, with the reason.

        When every file fails alone too, no file is to blame (the store went away, say):
        the error is raised, and the supervisor restarts the embedder as for any crash.
        """
        log().warning(
            "batch_split", actor=self._child_name, files=len(batch), error=describe(error)
        )
        out: list[FileEmbedded | FileFailed] = []
        failed = 0
        for parsed in batch:
            try:
                out.extend(self._embed([parsed]))
            except Exception as exc:
                failed += 1
                reason = f"the embedder failed on this file ({describe(exc)})"
                problem = FileProblem(parsed.path, reason, "embed_failed")
                out.append(FileFailed(problem, parsed.source))
        if len(batch) > 1 and failed == len(batch):
            raise error
        return out

    def _reporter(self, files: int) -> Callable[[int, int], None] | None:
        watcher = self.progress_to
        if watcher is None:
            return None

        def report(embedded: int, to_embed: int) -> None:
            if embedded:
                watcher.tell(ChunksEmbedded(embedded))
            else:
                watcher.tell(ChunksQueued(files, to_embed))

        return report


class WriterActor(_Stage):
    """The single DuckDB writer: each file's chunks are swapped in one transaction."""

    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        open_store: StoreFactory,
        coordinator: pykka.ActorRef[Any],
        slots: threading.Semaphore,
        faults: FaultPlan | None = None,
        write_failed: WriteFailed | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.open_store, self.coordinator, self.slots = open_store, coordinator, slots
        self.write_failed = write_failed
        self._store: Store | None = None
        self._flagged = False  # whether this run's writes are already marked for a rebuild
        self._writing: str | None = None  # the file being written, for a commit drill

    def start_up(self) -> None:
        self._store = self.open_store()
        faults = self._faults
        if faults is not None:
            self._store.before_commit = lambda: faults.check_commit(self._writing)

    def on_start_failed(self) -> None:
        self._close()

    def on_stop(self) -> None:
        self._close()

    def on_failure(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._close()
        super().on_failure(exc_type, exc_value, traceback)

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def handle(self, message: Any) -> Any:
        if isinstance(message, FinishRun) or self.write_failed is None:
            return self._write(message)  # an `ask`: the asker gets the error itself
        try:
            return self._write(message)
        except StoreWriteError as exc:
            # The disk refused (no permission, full): no file is to blame, and every next
            # write would fail the same way, so the run stops with the cause instead of
            # crashing file after file into the dead letters.
            self.write_failed(exc)
            return None

    def _write(self, message: Any) -> Any:
        store = self._store
        assert store is not None
        self._writing = getattr(message, "path", None)
        if isinstance(message, FileEmbedded | FilesRemoved) and not self._flagged:
            store.mark_fulltext_stale()
            self._flagged = True
        if isinstance(message, FileEmbedded):
            kept = store.replace_file(
                message.source, message.chunks, message.partial, message.graph
            )
            if message.partial is not None:
                log_problem(message.partial, chunks=len(message.chunks), stale_chunks_kept=kept)
            self._done(
                FileDone(
                    message.path,
                    "indexed",
                    chunks=len(message.chunks),
                    embedded=message.embedded,
                    cached=message.cached,
                    problem=message.partial,
                )
            )
        elif isinstance(message, FileFailed):
            kept = store.mark_failed(message.problem, message.source)
            log_problem(message.problem)
            if kept:
                log().info("chunks_kept_stale", file=message.path, chunks=kept)
            self._done(FileDone(message.path, "dropped", problem=message.problem))
        elif isinstance(message, FilesRemoved):
            store.remove_files(message.paths)
            for path in message.paths:
                self.coordinator.tell(FileDone(path, "removed"))
        elif isinstance(message, FinishRun):
            # A dropped file keeps its chunks and their search text: only writes and removals
            # (and a wipe, see Store.prepare) mark the full-text index stale. An index built
            # with other tokenizer settings (another default) is rebuilt with today's.
            if not store.has_fulltext() or store.fulltext_stale() or store.fulltext_outdated():
                started = time.monotonic()
                how = store.update_fulltext()
                log().info(
                    "fulltext_updated", how=how, seconds=round(time.monotonic() - started, 4)
                )
            self._flagged = False
            store.set_meta(last_run=message.summary_json)
            if not store.checkpoint(wait=1.0):
                log().info("checkpoint_deferred", reason="another connection is reading")
        return None

    def _done(self, done: FileDone) -> None:
        self.coordinator.tell(done)
        self.slots.release()
