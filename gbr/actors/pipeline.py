"""Start the supervised index pipeline, run it over a tree once, and stop it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pykka

from gbr.actors.coordinator import CoordinatorActor, ProgressCallback
from gbr.actors.faults import FaultPlan
from gbr.actors.messages import FileDone, FinishRun, ScanTree
from gbr.actors.stages import EmbedderActor, ParserActor, WalkerActor, WriterActor
from gbr.actors.supervisor import RestartPolicy, Supervisor
from gbr.core.chunk_text import DEFAULT_EMBED_FORMAT, chunk_budget
from gbr.core.chunker import CHUNKER_VERSION, ChunkLimits
from gbr.core.embedder import OnnxEmbedder
from gbr.core.errors import SupervisionError
from gbr.core.paths import check_root, default_db, package_root
from gbr.core.records import FileProblem, IndexSummary
from gbr.core.snapshot import StagedIndex, WriterLock, unchanged_summary
from gbr.core.store import Store
from gbr.core.telemetry import log
from gbr.core.walker import DEFAULT_MAX_BYTES, WalkOptions

# Package-path logic lives in gbr.core.paths; these names stay importable from here.
__all__ = ["IndexOptions", "check_root", "default_db", "package_root", "run_index"]


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
    # Relative paths (files or folders) that changed or vanished: only these are walked, and
    # a listed path no longer found is removed. None indexes the whole tree.
    only: frozenset[str] | None = None
    # Set it to end a run early (a daemon shutting down): files already written are kept,
    # and the full-text index is still rebuilt for them.
    cancel: threading.Event | None = None
    # Write a copy and rename it over the index at the end, so that readers in other
    # processes keep the last complete index meanwhile (gbr.core.snapshot). Not for a
    # daemon: it holds the index, and the writer lock, for its whole life.
    staged: bool = False


def run_index(
    options: IndexOptions,
    model: OnnxEmbedder,
    progress: ProgressCallback | None = None,
) -> IndexSummary:
    """Index `options.root` into `options.db`; raises SupervisionError if an actor keeps dying."""
    if options.staged:
        return _run_staged(options, model, progress)
    root = package_root(options.root)
    started = time.monotonic()
    summary = IndexSummary(root=str(root), db=str(options.db))
    budget = chunk_budget(model.max_tokens, options.embed_format)
    with Store.open(options.db) as store:
        summary.reindex_reason = store.prepare(**_index_meta(model, options.embed_format))
        check_root(store, root, options.db)
        states = store.file_states()
    only = options.only
    if only is not None and (summary.reindex_reason or "" in only or "." in only):
        only = None  # the tables were wiped (or the root itself is listed): walk everything

    def open_store() -> Store:
        return Store.open(options.db)

    abort = threading.Event()
    slots = threading.Semaphore(options.in_flight)
    finished = threading.Event()
    coordinator = CoordinatorActor.start(summary, finished, progress)

    def dead_letter(child: str, message: Any, error: BaseException | None) -> None:
        path = getattr(message, "path", None)
        if path is None:
            return
        problem = FileProblem(
            path, f"dropped after the {child} crashed twice on it ({error})", "dead_letter"
        )
        coordinator.tell(FileDone(path, "dropped", problem=problem))
        slots.release()

    def give_up(child: str, error: BaseException | None) -> None:
        abort.set()
        finished.set()

    supervisor = Supervisor(options.policy, on_dead_letter=dead_letter, on_give_up=give_up)
    faults = options.faults
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
                progress_to=coordinator if progress is not None else None,
            ),
        )
        limits = ChunkLimits(max_tokens=budget)
        parsers = [
            supervisor.start_child(
                f"parser-{i}",
                lambda name=f"parser-{i}": ParserActor.start(
                    supervisor,
                    name,
                    embedder=embedder,
                    writer=writer,
                    count_tokens=model.count_tokens,
                    limits=limits,
                    faults=faults,
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
                options=WalkOptions(
                    include_deps=options.include_deps,
                    max_bytes=options.max_bytes,
                    only=only,
                    follow_outside_links=options.follow_outside_links,
                ),
                states=states,
                parsers=parsers,
                writer=writer,
                coordinator=coordinator,
                slots=slots,
                abort=abort,
                faults=faults,
            ),
        )
        walker.tell(ScanTree())
        if not _wait(finished, options.timeout, options.cancel):
            raise SupervisionError(
                f"indexing did not finish within {options.timeout:g} s; run again with --debug"
            )
        if options.cancel is not None and options.cancel.is_set():
            abort.set()  # the walker stops; files in flight may still land, which is fine
            log().info("index_cancelled", files_done=summary.files_indexed)
        if supervisor.given_up is not None:
            raise supervisor.given_up
        summary.restarts = supervisor.restarts
        summary.dead_letters = supervisor.dead_letters
        summary.seconds = time.monotonic() - started
        writer.ask(FinishRun(json.dumps(summary.as_dict())), timeout=600)
        summary.seconds = time.monotonic() - started
    finally:
        abort.set()
        supervisor.stop_all()
        coordinator.stop(block=True)
    log().info("index_finished", **{k: v for k, v in summary.as_dict().items() if k != "dropped"})
    return summary


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
    with WriterLock(options.db):
        if options.only is None:
            walk = WalkOptions(include_deps=options.include_deps, max_bytes=options.max_bytes)
            want = {k: str(v) for k, v in _index_meta(model, options.embed_format).items()}
            same = unchanged_summary(options.db, root, walk, want)
            if same is not None:
                log().info("index_unchanged", files=same.files_seen, seconds=same.seconds)
                return same
        staged = StagedIndex(options.db)
        work = replace(options, db=staged.path, staged=False)
        staged.begin()  # a copy cut short is never committed; the next run removes it
        try:
            summary = run_index(work, model, progress)
        except (KeyboardInterrupt, SupervisionError):
            _commit_or_discard(staged, None)
            raise
        except BaseException:
            staged.discard()
            raise
        summary.db = str(options.db)
        _commit_or_discard(staged, summary)
        return summary


def _commit_or_discard(staged: StagedIndex, summary: IndexSummary | None) -> None:
    try:
        staged.commit(summary)
    except BaseException:
        staged.discard()
        raise


def _wait(finished: threading.Event, timeout: float | None, cancel: threading.Event | None) -> bool:
    """Wait for the run to finish, or for `cancel`; False only when the timeout ran out."""
    if cancel is None:
        return finished.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not finished.wait(0.05):
        if cancel.is_set():
            return True
        if deadline is not None and time.monotonic() > deadline:
            return False
    return True


def stop_everything() -> None:
    """Last resort for tests and interrupted runs: stop every pykka actor still alive."""
    pykka.ActorRegistry.stop_all(block=True, timeout=5)
