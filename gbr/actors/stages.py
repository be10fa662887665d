"""The pipeline's actors: thin shells that receive, call gbr.core, and send on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pykka

from gbr.actors.faults import FaultPlan
from gbr.actors.messages import (
    ChunksIn,
    EmbedMissing,
    FileDone,
    FileEmbedded,
    FileFailed,
    FileFound,
    FilesRemoved,
    FinishRun,
    KeepFinished,
    ScanTree,
    VectorsDone,
    VectorsFound,
    VectorsStored,
    WalkFinished,
)
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor, describe
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import StoreWriteError
from gbr.core.graph.build import chunk_with_graph
from gbr.core.parse.chunk_text import DEFAULT_EMBED_FORMAT, embed_text
from gbr.core.parse.chunker import ChunkLimits, new_parser
from gbr.core.parse.oversize import ParseStopped
from gbr.core.parse.walker import (
    FoundFile,
    HashedFile,
    Scope,
    WalkBegun,
    Walked,
    WalkOptions,
    read_file,
    walk,
)
from gbr.core.records import Chunk, FileProblem, FileState, PartialFile, SourceFile
from gbr.core.store.facade import FileWrite, Store
from gbr.core.store.indexing import SharedVectors, embed_texts, with_known_vectors
from gbr.core.store.snapshot import PublishPace
from gbr.core.store.test_words import TestWords
from gbr.core.store.writes import StoredChunk
from gbr.core.telemetry import log

StoreFactory = Callable[[], Store]
# Shows the index as written to readers, waiting up to the seconds given; False if it could not.
Keep = Callable[[Store, float], bool]
Prepare = Callable[[Sequence[Chunk]], list[StoredChunk]]
WriteFailed = Callable[[StoreWriteError], None]
LARGE_FILE = 1_000_000  # bytes; chunking a file this big is announced in telemetry
# Files the writer swaps in one transaction when they queue up behind each other: one
# file's transaction cost ~17 ms, 32 files' ~60 ms. Bounded so that a save in the daemon
# is never held up behind a long batch, and so that a batch is a fraction of the in-flight
# files (IndexOptions.in_flight), which wait for their slots until written.
BATCH_FILES = 32
BATCH_CHUNKS = 2048


class _Stage(SupervisedActor):
    """A pipeline stage: every message it takes is open to a crash drill."""

    # Python's exit joins non-daemon threads: a stage busy with a 10 MB file held up an
    # interrupted run for minutes. Normal runs stop every stage explicitly.
    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        self._in_hand = message  # a drilled crash salvages it, like any other
        self.check_fault(message)
        return super().on_receive(message)


class _StoreStage(_Stage):
    """A stage that holds the index open for as long as it lives: opened when it starts,
    closed however it ends (stopped, crashed, or failing to start), so a restarted stage
    never finds the file still held by its predecessor."""

    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        open_store: StoreFactory,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.open_store = open_store
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
        begun: WalkBegun | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.root, self.options, self.states = root, options, states
        self.parsers, self.writer, self.coordinator = parsers, writer, coordinator
        self.slots, self.abort = slots, abort
        self.begun = begun  # the walk the run's no-change check began, to go on with

    def handle(self, message: Any) -> None:
        if isinstance(message, ScanTree):
            self._scan()

    def _scan(self) -> None:
        paths: set[str] = set()
        seen = 0
        turn = 0
        begun = self.begun.take() if self.begun is not None else None
        items: Iterator[Walked] = begun or walk(self.root, self.options)
        for item in items:
            if self.abort.is_set():
                return
            paths.add(item.path)
            seen += 1
            source = (
                read_file(item, self.options.max_bytes) if isinstance(item, FoundFile) else item
            )
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
            if isinstance(source, HashedFile):  # its bytes were not kept (it failed before)
                source = read_file(source.found, self.options.max_bytes)
                if isinstance(source, FileProblem):
                    self._send(self.writer, FileFailed(source))
                    continue
            known = source.path in self.states
            self._send(self.parsers[turn % len(self.parsers)], FileFound(source, known))
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
    """Chunks a file and does all per-chunk work but the model's: the file goes straight
    to the writer, and its vectors come behind (EmbedderActor)."""

    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        writer: ChildRef,
        count_tokens: Callable[[str], int],
        limits: ChunkLimits,
        prepare: Prepare,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.writer = writer
        self.count_tokens, self.limits = count_tokens, limits
        self.prepare = prepare
        self.parser = new_parser()

    def handle(self, message: Any) -> None:
        if isinstance(message, FileFound):
            if message.source.size >= LARGE_FILE:
                log().info("large_file_chunking", file=message.path, bytes=message.source.size)
            source = message.source
            try:
                result, graph = chunk_with_graph(
                    source, self.parser, self.count_tokens, self.limits
                )
            except ParseStopped:
                return  # the run is interrupted: the file stays as it was in the index
            if isinstance(result, FileProblem):
                self.writer.tell(FileFailed(result, source))
                return
            chunks, partial = (
                (result.chunks, result.problem)
                if isinstance(result, PartialFile)
                else (tuple(result), None)
            )
            stored = tuple(self.prepare(chunks))
            self.writer.tell(FileEmbedded(source, stored, partial, graph, known=message.known))


class EmbedderActor(_StoreStage):
    """Gives vectors to the chunks written without one, a page at a time, behind the write."""

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
        shared: SharedVectors | None = None,
    ) -> None:
        super().__init__(supervisor, name, open_store, faults)
        self.model, self.writer = model, writer
        self.shared = shared  # vectors kept beyond this index (gbr.core.embed.cache)
        self.batch_chunks, self.embed_format = batch_chunks, embed_format
        self._texts_done = 0  # texts embedded so far, for the progress events

    def handle(self, message: Any) -> None:
        if isinstance(message, EmbedMissing):
            self._embed_missing(message.after)

    def _embed_missing(self, after: tuple[int, str] | None) -> None:
        """One page of the texts written without a vector: embedded, sent to the writer,
        and the next page asked for through this child's address, so a restart resumes."""
        assert self._store is not None
        page = self._store.missing_vectors(after, self.batch_chunks)
        if not page:
            self.writer.tell(VectorsDone())
            return
        texts = {key: embed_text(chunk, self.embed_format) for _, key, chunk in page}
        # The shared cache was asked when these chunks were written, but not by a run that
        # only resumes an interrupted fill: it holds what that run paid for, so ask again.
        known = self.shared.lookup(list(texts)) if self.shared is not None else {}
        if known:
            self.writer.tell(VectorsFound(known, cached=True))
        rest = {key: text for key, text in texts.items() if key not in known}
        if rest:
            self.writer.tell(VectorsFound(embed_texts(rest, self.model, self.shared)))
        self._texts_done += len(texts)
        log().info("embedding_progress", done=self._texts_done, page=len(texts))
        tokens, key, _ = page[-1]
        self.child().tell(EmbedMissing((tokens, key)))


def _none_known(keys: Sequence[str]) -> dict[str, Any]:
    return {}


class WriterActor(_StoreStage):
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
        shared: SharedVectors | None = None,
        vectors_done: threading.Event | None = None,
        publish: Callable[[Store], None] | None = None,
        keep: Keep | None = None,
        test_words: TestWords | None = None,
    ) -> None:
        super().__init__(supervisor, name, open_store, faults)
        self.coordinator, self.slots = coordinator, slots
        self.test_words = test_words  # words tests lend to what they call, or None
        self.write_failed = write_failed
        # For chunks that come without vectors: the caches' vectors are filled in here.
        self.shared = shared
        self.vectors_done = vectors_done  # set once every vector is written
        # Shows the index, as written so far, to readers in other processes (staged runs).
        self.publish = publish
        self.keep = keep  # shows the index as written when the run is interrupted
        self._changed = False  # whether this run wrote anything yet
        self._kept = False  # interrupted and shown: nothing more is written
        self._pace = PublishPace()
        self._flagged = False  # whether this run's writes are already marked for a rebuild
        self._writing: tuple[str, ...] = ()  # the files being written, for a commit drill
        self._pending: list[FileEmbedded] = []  # files waiting to share one transaction

    def start_up(self) -> None:
        super().start_up()
        assert self._store is not None
        faults = self._faults
        if faults is not None:
            self._store.before_commit = lambda: faults.check_commit(self._writing)

    def unfinished(self) -> list[Any]:
        return [m for m in self._pending if m is not self._in_hand]

    def handle(self, message: Any) -> Any:
        if self._kept:
            return None  # what was shown is what the interrupted run keeps
        if isinstance(message, KeepFinished):
            return self._keep_finished(message.until)
        if isinstance(message, FileEmbedded):
            self._pending.append(message)
            if not self._batch_full() and not self.actor_inbox.empty():
                return None  # the files behind it join its transaction
        if isinstance(message, FinishRun | ChunksIn) or self.write_failed is None:
            return self._write(message)  # an `ask`: the asker gets the error itself
        try:
            return self._write(message)
        except StoreWriteError as exc:
            # The disk refused (no permission, full): no file is to blame, and every next
            # write would fail the same way, so the run stops with the cause instead of
            # crashing file after file into the dead letters.
            self.write_failed(exc)
            return None

    def _batch_full(self) -> bool:
        return (
            len(self._pending) >= BATCH_FILES
            or sum(len(m.chunks) for m in self._pending) >= BATCH_CHUNKS
        )

    def _write(self, message: Any) -> Any:
        store = self._store
        assert store is not None
        if self._pending:  # every other message sees the files sent before it written
            self._changed = True
            self._write_pending(store)
        if isinstance(message, FileEmbedded):
            return None
        self._writing = (message.path,) if isinstance(message, FileFailed) else ()
        if isinstance(message, FilesRemoved) and not self._flagged:
            store.mark_fulltext_stale()
            self._flagged = True
        self._changed = True
        if isinstance(message, VectorsFound):
            filled = store.fill_vectors(message.vectors)
            self.coordinator.tell(VectorsStored(filled, cached=message.cached))
            if self._pace.due():
                self._publish(store)
        elif isinstance(message, VectorsDone):
            if self.vectors_done is not None:
                self.vectors_done.set()
        elif isinstance(message, ChunksIn):
            self._update_fulltext(store)
            if reused := store.fill_from_index():
                self.coordinator.tell(VectorsStored(reused, cached=True))
            coverage = store.coverage()
            if coverage[0] < coverage[1]:  # else the run's end shows it, a moment later
                self._publish(store)
            return coverage
        elif isinstance(message, FileFailed):
            self._drop(store, message.problem, message.source)
        elif isinstance(message, FilesRemoved):
            store.remove_files(message.paths)
            for path in message.paths:
                self.coordinator.tell(FileDone(path, "removed"))
        elif isinstance(message, FinishRun):
            # A dropped file keeps its chunks and their search text: only writes and removals
            # (and a wipe, see Store.prepare) mark the full-text index stale. An index built
            # with other tokenizer settings (another default) is rebuilt with today's.
            self._update_fulltext(store)
            self._flagged = False
            store.set_meta(last_run=message.summary_json)
            if not store.checkpoint(wait=1.0):
                log().info("checkpoint_deferred", reason="another connection is reading")
        return None

    def _write_pending(self, store: Store) -> None:
        """Write the waiting files in one transaction, or one by one if that fails: a
        batch mixes files, so one file's bad input must not cost the others. A file that
        fails alone is dropped with the reason; when every file fails alone too, no file
        is to blame, and the error goes on (the supervisor restarts the writer, and the
        files still waiting are delivered again)."""
        if not self._flagged:
            store.mark_fulltext_stale()
            self._flagged = True
        batch = list(self._pending)
        try:
            self._write_files(store, batch)
        except StoreWriteError:
            raise
        except Exception as exc:
            if len(batch) == 1:
                raise
            self._write_apart(store, batch, exc)
        self._pending = []

    def _write_apart(self, store: Store, batch: list[FileEmbedded], error: Exception) -> None:
        log().warning(
            "batch_split", actor=self._child_name, files=len(batch), error=describe(error)
        )
        failed: list[tuple[FileEmbedded, str]] = []
        for message in batch:
            try:
                self._write_files(store, [message])
            except StoreWriteError:
                raise
            except Exception as alone:
                failed.append((message, describe(alone)))
            self._pending.remove(message)
        if len(failed) == len(batch):
            self._pending = batch
            raise error
        for message, why in failed:
            reason = f"the writer failed on this file ({why})"
            self._drop(store, FileProblem(message.path, reason, "write_failed"), message.source)

    def _drop(self, store: Store, problem: FileProblem, source: SourceFile | None) -> None:
        kept = store.mark_failed(problem, source)
        log_problem(problem)
        if kept:
            log().info("chunks_kept_stale", file=problem.path, chunks=kept)
        self._done(FileDone(problem.path, "dropped", problem=problem))

    def _write_files(self, store: Store, batch: Sequence[FileEmbedded]) -> None:
        """Swap the files' chunks in one transaction, with every vector a cache holds."""
        self._writing = tuple(m.path for m in batch)
        if self._faults is not None:
            self._faults.check_files(self._child_name, self._writing)
        # The index's own lookup costs a query: only files it held may gain from it.
        filled = {
            held: iter(
                with_known_vectors(
                    [c for m in batch if m.known is held for c in m.chunks],
                    store.cached_vectors if held else _none_known,
                    self.shared,
                )[0]
            )
            for held in (True, False)
        }
        chunks = [[next(filled[m.known]) for _ in m.chunks] for m in batch]
        writes = [
            FileWrite(m.source, c, m.partial, m.graph) for m, c in zip(batch, chunks, strict=True)
        ]
        kept = store.replace_files(writes)
        for m, mine, stale in zip(batch, chunks, kept, strict=True):
            if m.partial is not None:
                log_problem(m.partial, chunks=len(m.chunks), stale_chunks_kept=stale)
            hits = sum(
                1
                for a, b in zip(m.chunks, mine, strict=True)
                if a.vector is None and b.vector is not None
            )
            self._done(
                FileDone(
                    m.path,
                    "indexed",
                    chunks=len(m.chunks),
                    cached=hits,
                    problem=m.partial,
                )
            )

    def _update_fulltext(self, store: Store) -> None:
        lend = self.test_words
        if not store.has_fulltext() or store.fulltext_stale() or store.fulltext_outdated(lend=lend):
            started = time.monotonic()
            how = store.update_fulltext(lend=lend)
            log().info("fulltext_updated", how=how, seconds=round(time.monotonic() - started, 4))

    def _keep_finished(self, until: float) -> bool:
        """Write the files waiting and show the index as written, so that an interrupted
        run keeps what it finished: True once shown (or when there was nothing to show)."""
        store = self._store
        self._kept = True
        if store is None or self.keep is None:
            return False
        if self._pending:
            self._changed = True
            self._write_pending(store)
        if not self._changed:
            return True
        with self._pace.timed():
            return self.keep(store, max(0.0, until - time.monotonic()))

    def _publish(self, store: Store) -> None:
        """Show the index as written so far to its readers (IndexOptions.publish)."""
        if self.publish is None:
            return
        with self._pace.timed():
            self.publish(store)

    def _done(self, done: FileDone) -> None:
        self.coordinator.tell(done)
        self.slots.release()
