"""Start the supervised index pipeline, run it over a tree once, and stop it."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pykka

from gbr.actors.coordinator import CoordinatorActor
from gbr.actors.faults import FaultPlan
from gbr.actors.messages import (
    ChunksIn,
    ChunksQueued,
    EmbedMissing,
    FileDone,
    FileFailed,
    FilesRemoved,
    FinishRun,
    KeepFinished,
    ScanTree,
    SummaryWanted,
)
from gbr.actors.pykka_gaps import inbox_empty
from gbr.actors.stages import EmbedderActor, ParserActor, WalkerActor, WriterActor
from gbr.actors.supervisor import RestartPolicy, Supervisor, describe
from gbr.core.embed.cache import EmbedCache
from gbr.core.embed.cache_config import CacheConfig
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import GbrError, SupervisionError
from gbr.core.parse.chunk_text import DEFAULT_EMBED_FORMAT, chunk_budget
from gbr.core.parse.chunker import CHUNKER_VERSION, ChunkLimits
from gbr.core.parse.oversize import stop_parsing
from gbr.core.parse.walker import WalkBegun, WalkOptions
from gbr.core.paths import package_root
from gbr.core.records import FileProblem, FileState, IndexSummary, ProgressCallback
from gbr.core.sizes import DEFAULT_MAX_BYTES
from gbr.core.store import vector_file
from gbr.core.store.facade import Store, check_root
from gbr.core.store.files import refuse_odd_file
from gbr.core.store.indexing import prepare_chunks
from gbr.core.store.lock import LOCK_WAIT, open_when_free
from gbr.core.store.snapshot import StagedIndex, WriterLock, survey
from gbr.core.store.test_words import TestWords
from gbr.core.telemetry import log

if TYPE_CHECKING:
    import numpy as np


@dataclass
class IndexOptions:
    root: Path
    db: Path
    include_deps: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    follow_outside_links: bool = False
    parsers: int = 2
    in_flight: int = 64  # files between the walker and the writer at once
    batch_chunks: int = 256  # chunks the embedder gathers across files before it sorts and runs
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    faults: FaultPlan | None = None
    timeout: float | None = None  # seconds; None waits as long as work progresses
    embed_format: str = DEFAULT_EMBED_FORMAT
    # Words test functions lend to the BM25 text of what they call (GBR_TEST_WORDS); None:
    # none (gbr.core.store.test_words).
    test_words: TestWords | None = None
    # Relative paths (files or folders) that changed or vanished: only these are walked, and
    # a listed path no longer found is removed. None indexes the whole tree.
    only: frozenset[str] | None = None
    # Set it to end a run early (a daemon shutting down): files already written are kept,
    # and the full-text index is still rebuilt for them.
    cancel: threading.Event | None = None
    # Write a copy and rename it over the index at the end, so that readers in other
    # processes keep the last complete index meanwhile (gbr.core.store.snapshot). Not for a
    # daemon: it holds the index, and the writer lock, for its whole life.
    staged: bool = False
    # A staged run that starts from nothing instead of a copy of the index (`--rebuild`):
    # readers keep the old index whole until the new one is; nothing is shown before, and
    # an interrupted rebuild leaves the old index as it was.
    fresh: bool = False
    ignore: tuple[str, ...] = ()  # more patterns to skip (.gitignore syntax, from the root)
    lock_wait: float = LOCK_WAIT  # seconds to wait for an index another process holds
    stall_seconds: float = 10.0  # an idle pipeline with files unaccounted for is stuck
    # Vectors shared with every other index of this user; None embeds without it.
    embed_cache: CacheConfig | None = None
    # Shows the index, as written so far, to its readers: called on the writer's thread with
    # its store, when the chunks are in and now and then as vectors arrive. A staged run
    # copies its file over the index; a daemon reloads its searcher.
    publish: Callable[[Store], None] | None = None
    # Shows the index as written to readers when the run is interrupted, within the seconds
    # given (a staged run copies its file over the index), so that it keeps what it finished.
    keep: Callable[[Store, float], bool] | None = None

    def walk_options(self) -> WalkOptions:
        """What decides which files are walked: one place, for the run and its no-change check."""
        return WalkOptions(
            include_deps=self.include_deps,
            max_bytes=self.max_bytes,
            follow_outside_links=self.follow_outside_links,
            ignore=self.ignore,
        )


def run_index(
    options: IndexOptions,
    model: OnnxEmbedder,
    progress: ProgressCallback | None = None,
) -> IndexSummary:
    """Index `options.root` into `options.db`; raises SupervisionError if an actor keeps dying."""
    if options.staged:
        return _run_staged(options, model, progress)
    return _run_in_place(options, model, progress)


def _run_in_place(
    options: IndexOptions,
    model: OnnxEmbedder,
    progress: ProgressCallback | None,
    begun: WalkBegun | None = None,
) -> IndexSummary:
    """Index into `options.db` itself, going on with the walk `begun`, if any.

    The store opened here stays open until the actors have stopped: DuckDB shares one
    database between the connections of a process, so the actors' own connections cannot
    be refused by another process's lock once this one holds the file. (Closed in between,
    a `search` opening the file for a moment made the actors' starts fail, and the run
    waited for them forever.)
    """
    root = package_root(options.root)
    budget = chunk_budget(model.max_tokens, options.embed_format)

    def busy(holder: str) -> None:
        log().warning("index_busy", db=str(options.db), holder=holder, wait=options.lock_wait)

    opened = open_when_free(lambda: Store.open(options.db), options.db, options.lock_wait, busy)
    with opened as store:
        reason = store.prepare(**_index_meta(model, options.embed_format))
        summary = IndexSummary(root=str(root), db=str(options.db), reindex_reason=reason)
        check_root(store, root, options.db)
        states = store.file_states()
        return _run_pipeline(options, model, progress, root, budget, summary, states, begun)


def _run_pipeline(
    options: IndexOptions,
    model: OnnxEmbedder,
    progress: ProgressCallback | None,
    root: Path,
    budget: int,
    base: IndexSummary,
    states: dict[str, FileState],
    begun: WalkBegun | None = None,
) -> IndexSummary:
    """Run the actors over the tree; the coordinator counts, and its summary is returned
    with what only this function knows (restarts, dead letters, time) put in."""
    started = time.monotonic()
    only = options.only
    if only is not None and (base.reindex_reason or "" in only or "." in only):
        only = None  # the tables were wiped (or the root itself is listed): walk everything

    def open_store() -> Store:
        return Store.open(options.db)

    abort = threading.Event()
    slots = threading.Semaphore(options.in_flight)
    finished = threading.Event()
    vectors_done = threading.Event()  # the embedding behind the write is over
    failure: list[GbrError] = []  # the first error that ends the run early
    coordinator = CoordinatorActor.start(base, finished, progress)

    def counted() -> IndexSummary:
        summary = coordinator.ask(SummaryWanted(), timeout=60)
        assert isinstance(summary, IndexSummary)
        return summary

    def fail(error: GbrError) -> None:
        if not failure:
            failure.append(error)
        abort.set()
        finished.set()
        vectors_done.set()

    def dead_letter(child: str, message: Any, error: BaseException | None) -> None:
        why = f"dropped after the {child} crashed twice on it ({describe(error)})"
        if isinstance(message, FilesRemoved):
            for gone in message.paths:
                problem = FileProblem(gone, why, "dead_letter")
                coordinator.tell(FileDone(gone, "dropped", problem=problem))
            return
        path: str | None = getattr(message, "path", None)
        if path is None:  # the walk or the run's end: nothing can finish without it
            fail(
                SupervisionError(
                    f"the {child} crashed twice on {type(message).__name__} "
                    f"({describe(error)}); run again with --debug; files already written are kept"
                )
            )
            return
        problem = FileProblem(path, why, "dead_letter")
        if not (child == "writer" and isinstance(message, FileFailed)):
            # Recorded in the store like any dropped file, so `status` explains it too;
            # the writer reports it and frees its slot.
            with contextlib.suppress(SupervisionError):
                writer.tell(FileFailed(problem, getattr(message, "source", None)))
                return
        coordinator.tell(FileDone(path, "dropped", problem=problem))
        slots.release()

    def give_up(child: str, error: BaseException | None) -> None:
        abort.set()
        finished.set()
        vectors_done.set()

    supervisor = Supervisor(options.policy, on_dead_letter=dead_letter, on_give_up=give_up)
    interrupted = False
    faults = options.faults
    shared = EmbedCache(options.embed_cache, model.dim) if options.embed_cache else None
    try:
        writer = supervisor.start_child(
            "writer",
            lambda: WriterActor.start(
                supervisor,
                "writer",
                open_store=open_store,
                coordinator=coordinator,
                slots=slots,
                faults=faults,
                write_failed=fail,
                shared=shared,
                vectors_done=vectors_done,
                publish=options.publish,
                keep=options.keep,
                test_words=options.test_words,
            ),
        )
        embedder = supervisor.start_child(
            "embedder",
            lambda: EmbedderActor.start(
                supervisor,
                "embedder",
                model=model,
                open_store=open_store,
                writer=writer,
                batch_chunks=options.batch_chunks,
                embed_format=options.embed_format,
                faults=faults,
                shared=shared,
            ),
        )
        limits = ChunkLimits(max_tokens=budget)
        # Every file's chunks are written first, with the vectors the caches hold and NULL
        # for the rest, and the full-text index comes up: BM25 search works then, and the
        # missing vectors fill in behind, a page at a time (EmbedMissing).
        prepare = functools.partial(
            prepare_chunks, embedder=model, embed_format=options.embed_format
        )
        parsers = [
            supervisor.start_child(
                f"parser-{i}",
                lambda name=f"parser-{i}": ParserActor.start(  # type: ignore[misc]
                    supervisor,
                    name,
                    writer=writer,
                    count_tokens=model.count_tokens,
                    limits=limits,
                    faults=faults,
                    prepare=prepare,
                ),
            )
            for i in range(max(1, options.parsers))
        ]
        walker = supervisor.start_child(
            "walker",
            lambda: WalkerActor.start(
                supervisor,
                "walker",
                root=root,
                options=replace(options.walk_options(), only=only),
                states=states,
                parsers=parsers,
                writer=writer,
                coordinator=coordinator,
                slots=slots,
                abort=abort,
                faults=faults,
                begun=begun if only is None else None,
            ),
        )
        walker.tell(ScanTree())

        def stalled() -> bool:
            return supervisor.idle_for() > options.stall_seconds and inbox_empty(coordinator)

        def wait_for(event: threading.Event, what: str) -> None:
            ended = _wait(event, options.timeout, options.cancel, stalled)
            if ended == "timeout":
                raise SupervisionError(
                    f"indexing did not finish within {options.timeout:g} s; run again with --debug"
                )
            if ended == "stalled":
                raise SupervisionError(
                    f"indexing stalled: no actor had work for {options.stall_seconds:g} s with "
                    f"{what} still unaccounted for; run again "
                    "(files already written are kept), with --debug to see why"
                )

        wait_for(finished, f"{counted().files_seen or 'some'} files")
        searchable = None
        in_index = None
        # Vectors a run cut short left out are embedded now too.
        if not failure and supervisor.given_up is None and not _cancelled(options):
            embedded, total = writer.ask(ChunksIn(), timeout=600)
            in_index = total
            searchable = time.monotonic() - started
            log().info("index_searchable", seconds=round(searchable, 3), chunks=total)
            if embedded < total:
                coordinator.tell(ChunksQueued(total - embedded))
                embedder.tell(EmbedMissing())
                wait_for(vectors_done, "vectors")
        if _cancelled(options):
            abort.set()  # the walker stops; files in flight may still land, which is fine
            log().info("index_cancelled", files_done=counted().files_indexed)
        if failure:
            raise failure[0]
        if supervisor.given_up is not None:
            cause = supervisor.given_up_cause
            # A store that cannot be opened or written says so better than "crashed N times".
            raise cause if isinstance(cause, GbrError) else supervisor.given_up
        summary = replace(
            counted(),
            restarts=supervisor.restarts,
            dead_letters=supervisor.dead_letters,
            seconds=time.monotonic() - started,
            seconds_searchable=searchable,
            chunks_in_index=in_index,
            cache_hits=shared.stats.hits if shared is not None else 0,
            cache_misses=shared.stats.misses if shared is not None else 0,
        )
        writer.ask(FinishRun(json.dumps(summary.as_dict())), timeout=600)
        summary = replace(summary, seconds=time.monotonic() - started)
    except KeyboardInterrupt:
        interrupted = True
        abort.set()  # the walker sends no more; what is written is shown before the exit
        stop_parsing()  # a big parse would starve the writer of the GIL meanwhile
        if options.keep is not None and "writer" in locals():
            _keep_finished(writer)
        raise
    finally:
        abort.set()
        # An interrupted run has kept what it finished: actors still busy (an ONNX batch,
        # a big file) are not waited for, as the process ends within its grace anyway.
        supervisor.stop_all(timeout=0.2 if interrupted else 30.0)
        with contextlib.suppress(pykka.Timeout):
            coordinator.stop(block=True, timeout=30)
        if shared is not None:
            shared.close()
    log().info("index_finished", **{k: v for k, v in summary.as_dict().items() if k != "dropped"})
    return summary


# Seconds an interrupted run has to show what it finished; within gbr.interrupts' grace.
KEEP_SECONDS = 4.0


def _keep_finished(writer: Any) -> None:
    """Ask the writer to show the index as written, so that "finished files are kept" holds;
    a writer that cannot within KEEP_SECONDS leaves the last index shown as it was."""
    until = time.monotonic() + KEEP_SECONDS
    try:
        kept = writer.ask(KeepFinished(until), timeout=KEEP_SECONDS + 0.5)
    except Exception as exc:  # a timeout, a dead writer: the run ends all the same
        kept = False
        log().warning("interrupted_not_kept", error=describe(exc))
    log().info("interrupted_kept" if kept else "interrupted_not_kept")


def _cancelled(options: IndexOptions) -> bool:
    return options.cancel is not None and options.cancel.is_set()


def _index_meta(model: OnnxEmbedder, embed_format: str) -> dict[str, Any]:
    """What `Store.prepare` records and checks: a change to any of it re-indexes everything."""
    budget = chunk_budget(model.max_tokens, embed_format)
    return {
        "model_id": model.model_id,
        # The chunk size is part of what the chunker produces.
        "chunker_version": f"{CHUNKER_VERSION}/{budget}",
        "dim": model.dim,
        "embed_format": embed_format,
    }


def _run_staged(
    options: IndexOptions, model: OnnxEmbedder, progress: ProgressCallback | None
) -> IndexSummary:
    """One writer at a time writes a copy; readers keep the old index until the rename.

    A run that would change nothing writes nothing. An interrupted run, or one whose actors
    gave up, still commits the files it finished, as a run in place would have kept them.
    """
    root = package_root(options.root)
    refuse_odd_file(options.db)  # never lock, copy or rename over /dev/null and the like
    with WriterLock(options.db):
        begun = None
        if options.only is None and not options.fresh:
            walk = options.walk_options()
            want = {k: str(v) for k, v in _index_meta(model, options.embed_format).items()}
            found = survey(options.db, root, walk, want, options.lock_wait, options.test_words)
            if isinstance(found, IndexSummary):
                log().info("index_unchanged", files=found.files_seen, seconds=found.seconds)
                return found
            begun = found
        before = None if options.fresh else _vectors_before(options.db)
        staged = StagedIndex(options.db)
        shown = not options.fresh  # a rebuild half done must not replace a whole index
        work = replace(
            options,
            db=staged.path,
            staged=False,
            fresh=False,
            publish=staged.publish if shown else None,
            keep=staged.keep if shown else None,
        )
        staged.begin(copy=shown)  # a copy cut short is never committed; the next run removes it
        try:
            summary = _run_in_place(work, model, progress, begun)
        except (KeyboardInterrupt, SupervisionError):
            if shown:
                _commit_or_discard(staged, None)
            else:
                staged.discard()
            raise
        except BaseException:
            staged.discard()
            raise
        summary = replace(summary, db=str(options.db))
        _commit_or_discard(staged, summary)
        _refresh_vectors(options.db, before)
        return summary


def _vectors_before(db: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The mapped vectors of the index a run starts from, when its vector file matches it:
    the mapping outlives the file's replacement, and the run's file reuses its rows."""
    if not db.is_file():
        return None
    try:
        with Store.open(db, read_only=True) as store:
            return store.mapped_vectors(vector_file.file_for(db))
    except GbrError as exc:
        log().info("vector_file_not_read", db=str(db), error=str(exc))
        return None


def _refresh_vectors(db: Path, before: tuple[np.ndarray, np.ndarray] | None) -> None:
    """Write the new index's vector file now, so that the next `search` maps it instead of
    reading every vector (gbr.core.store.vectors.refresh). A failure costs only that."""
    try:
        with Store.open(db, read_only=True) as store:
            store.refresh_vectors(vector_file.file_for(db), before)
    except GbrError as exc:
        log().warning("vector_file_not_refreshed", db=str(db), error=str(exc))


def _commit_or_discard(staged: StagedIndex, summary: IndexSummary | None) -> None:
    try:
        staged.commit(summary)
    except BaseException:
        staged.discard()
        raise


def _wait(
    finished: threading.Event,
    timeout: float | None,
    cancel: threading.Event | None,
    stalled: Callable[[], bool],
) -> str:
    """Wait for the run to finish, for `cancel`, for the timeout, or until `stalled()`.

    A run that finishes never stalls: some actor holds or awaits a message until the
    coordinator has heard of every file. A lost message would leave all of them idle and
    this wait unbounded, so an idle pipeline ends it ("stalled"), with no timeout needed.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while not finished.wait(0.1):
        if cancel is not None and cancel.is_set():
            return "finished"
        if deadline is not None and time.monotonic() > deadline:
            return "timeout"
        if stalled():
            return "stalled" if not finished.is_set() else "finished"
    return "finished"


def stop_everything() -> None:
    """Last resort for tests and interrupted runs: stop every pykka actor still alive."""
    pykka.ActorRegistry.stop_all(block=True, timeout=5)
