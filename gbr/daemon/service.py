"""The daemon's long-lived state: one store, one searcher, the supervised actors, the watcher.

Everything the HTTP layer needs goes through `Daemon`, so that `app.py` only parses and
renders. The DuckDB file is opened once, read-write, for the daemon's life: DuckDB allows
one writing process per file, and inside this one every connection must share the same
configuration (a read-only one next to a read-write one is refused). Searches use one
cursor per thread (`ThreadLocalStore`); index runs open their own connections to the
same database and are serialised by the Indexer actor, so searches keep answering while a
batch is written, each file's swap being one transaction.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gbr import __version__
from gbr.access import Found, LlmChoice, engine, open_provider
from gbr.access.requests import AskRequest, SearchRequest
from gbr.actors.faults import FaultPlan
from gbr.actors.indexer import IndexChanges, IndexEverything, start_indexer
from gbr.actors.oracle import AskQuestion
from gbr.actors.oracle import ask as ask_oracle
from gbr.actors.pipeline import run_index
from gbr.actors.pykka_gaps import queued
from gbr.actors.supervisor import ChildRef, RestartPolicy, Supervisor
from gbr.core.answer.oracle import (
    Answer,
    AskOptions,
    AskOutcome,
    ContextSink,
    TokenSink,
    outcome_of,
)
from gbr.core.embed.cache_config import CacheConfig
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.environ import NO_ENV
from gbr.core.errors import (
    DaemonError,
    GbrError,
    IndexEmptyError,
    MissingKeyError,
    SupervisionError,
)
from gbr.core.llm.base import Message
from gbr.core.parse.changes import ChangeSet
from gbr.core.rank.search import Filter, Ranking, Searcher
from gbr.core.records import IndexSummary, Mode
from gbr.core.sizes import DEFAULT_MAX_BYTES
from gbr.core.store.facade import Store, ThreadLocalStore, check_root, status_report
from gbr.core.store.test_words import TestWords
from gbr.core.telemetry import log
from gbr.daemon.filler import Filler, quiet_seconds
from gbr.daemon.metrics import Metrics
from gbr.daemon.oracles import Oracles, close_provider, settings_env
from gbr.daemon.reporting import degraded, describe_metrics, printable
from gbr.daemon.watcher import Watcher


@dataclass(frozen=True)
class DaemonConfig:
    root: Path
    db: Path
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = field(default=None, repr=False)
    debounce_ms: int = 200
    include_deps: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    ignore: tuple[str, ...] = ()  # the package's `ignore` setting
    follow_outside_links: bool = False
    faults: FaultPlan | None = None  # crash drills (GBR_FAULTS), never set in normal use
    embed_cache: CacheConfig | None = None  # None: off
    test_words: TestWords | None = None  # GBR_TEST_WORDS, as the package's config resolved it
    # The environment `serve` read at start-up: provider keys, the ranker and reranker
    # settings. Nothing below reads the process environment itself.
    env: Mapping[str, str] = field(default_factory=lambda: NO_ENV, repr=False)


@dataclass(frozen=True)
class Lost:
    """What the daemon lost track of: its package folder (it stops) or its index file (it
    starts again over a new one), and the one line that says so."""

    package_gone: bool
    reason: str


@dataclass
class AskPlan:
    """An /ask whose provider and oracle are resolved: what can fail as 4xx has failed."""

    question: str
    options: AskOptions
    oracle: ChildRef
    missing: MissingKeyError | None
    history: tuple[Message, ...] = ()  # earlier turns of a chat, oldest first


class Daemon:
    """Owns the index for the process's life and serves it to the HTTP layer."""

    def __init__(self, config: DaemonConfig, model: OnnxEmbedder) -> None:
        self.config = config
        self.model = model
        self.pid = os.getpid()
        self.host = config.host
        self.port = config.port
        self.started_at = time.time()
        self._started = time.monotonic()
        self.metrics = Metrics()
        describe_metrics(self)
        self.store: ThreadLocalStore | None = None
        self.searcher: Searcher | None = None
        self._reload_wanted = threading.Event()  # set by a pass whose chunks are in
        self.supervisor = Supervisor(
            RestartPolicy(max_restarts=5, within_seconds=30.0),
            on_dead_letter=self._dead_letter,
            on_give_up=self._gave_up,
        )
        self.indexer: ChildRef | None = None
        self.watcher = Watcher(
            config.root,
            self._changed,
            config.debounce_ms,
            on_restart=self._watcher_restarted,
            faults=config.faults,
        )
        self.index_problem: str | None = None  # why saved changes are not in the index yet
        self.indexing: str | None = None  # "full" or "changes" while a run is going
        self.first_pass = threading.Event()
        self.last_batch: dict[str, Any] | None = None
        self.pipeline_restarts = 0
        self.pipeline_dead_letters = 0
        self._cancel = threading.Event()
        self.oracles = Oracles(self.supervisor, config.env)
        self._own_llm: dict[str, Any] | None = None
        self._waiting: set[Future[IndexSummary]] = set()
        self._answering: set[threading.Event] = set()  # cancel flags of answers streaming now
        self._answering_lock = threading.Lock()
        self.filler: Filler | None = None
        # Why this daemon is indexing from scratch (its index file was lost), until its
        # first pass is in: /health says "degraded" meanwhile.
        self.recovering: str | None = None
        self._db_identity: tuple[int, int] | None = None  # (device, inode) of the open index

    # ----------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """Open the index and start the actors; nothing is indexed yet.

        An index that belongs to another tree is refused here, before the daemon listens,
        rather than by its first pass, which would leave it serving the wrong code.
        """
        base = Store.open(self.config.db)
        try:
            check_root(base, self.config.root.resolve(), self.config.db)
        except GbrError:
            base.close()
            raise
        self.store = ThreadLocalStore(base)
        self._db_identity = _identity(self.config.db)
        self.searcher = engine.open_searcher(
            self.store,
            self.model,
            Ranking.default(self.config.env),
            db=self.config.db,
            serving=True,
            # After a change, the vectors are read from DuckDB rather than their file
            # rewritten at every save.
            write_vector_file=False,
        )
        self.indexer = start_indexer(
            self.supervisor, self._run, self.config.faults, self._cancel, self._index_report
        )
        quiet = quiet_seconds(self.config.env)
        if quiet is not None and self.searcher.ranking.second is not None:
            self.filler = Filler(self._current_searcher, quiet, self._cancel, self._busy)

    def lost(self) -> Lost | None:
        """The package folder or the index file gone (deleted, or the index replaced by
        another file) since the daemon opened them; None while both are there.

        Without this check a daemon whose `.gbr` was deleted said "ok" while serving a
        deleted file, and a second `serve` could start beside it; one whose package was
        deleted served the old hits for ever."""
        root, db = self.config.root, self.config.db
        if not root.is_dir():
            return Lost(True, f"the package folder {root} is gone; the daemon stops")
        if _identity(db) != self._db_identity:
            return Lost(
                False,
                f"the index {db} was deleted or replaced while the daemon served it; "
                "indexing the package again into a new one",
            )
        return None

    def start_watching(self) -> None:
        """Watch first, then catch up: a change made during the first pass is not missed."""
        assert self.indexer is not None
        self.watcher.start()
        if self.filler is not None:
            self.filler.start()
        self.indexer.tell(IndexEverything("startup: catch up with changes made while stopped"))

    def begin_shutdown(self) -> None:
        """Stop taking work: no new batches; the running pass and answers in flight end early.

        Waiters on a pass are told; an answer being streamed stops at its next delta and
        its client gets what came.

        Called before the HTTP server stops, so a request waiting on a pass ends at once
        instead of holding the server's grace period.
        """
        self._cancel.set()
        self.watcher.stop()
        with self._answering_lock:
            for cancel in self._answering:
                cancel.set()  # each stops at its next delta; its client gets what came
        for future in list(self._waiting):
            if not future.done():
                future.set_exception(DaemonError("the daemon is shutting down; run it again"))

    def close(self) -> None:
        """Stop the actors (after the pass in progress), checkpoint, close the index."""
        self.begin_shutdown()
        self.supervisor.stop_all(timeout=120)
        if self.filler is not None:
            self.filler.join(timeout=10)  # between two batches once it sees the stop
        self.oracles.close()
        if self.searcher is not None:
            self.searcher.close()  # its background reads end before the store closes
        if self.store is not None:
            # Searches' cursors first: an open transaction would make the checkpoint fail.
            self.store.close_cursors()
            try:
                written = self.store.checkpoint()
            except Exception as exc:  # closing the last connection still folds the WAL in
                written = False
                log().error("checkpoint_failed", error=f"{type(exc).__name__}: {exc}")
            log().info(
                "checkpoint_written" if written else "checkpoint_at_close", db=str(self.config.db)
            )
            self.store.close()
            self.store = None

    # --------------------------------------------------------------- indexing

    def _changed(self, changes: ChangeSet, seen_at: float) -> None:
        """The watcher's callback, on its thread: queue the batch for the Indexer."""
        if self.indexer is None or self._cancel.is_set():
            return
        try:
            if changes.full:
                self.indexer.tell(IndexEverything("an ignore file or gleam.toml changed"))
            else:
                self.indexer.tell(IndexChanges(changes.paths, seen_at))
        except SupervisionError as exc:
            log().error("change_not_queued", error=str(exc))

    def _watcher_restarted(self) -> None:
        """Events were lost while the watcher was down: a full pass catches up with them."""
        if self.indexer is None or self._cancel.is_set():
            return
        try:
            self.indexer.tell(IndexEverything("the watcher restarted: catch up"))
        except SupervisionError as exc:
            log().error("change_not_queued", error=str(exc))

    def _index_report(self, problem: str | None) -> None:
        self.index_problem = problem

    def _run(self, only: frozenset[str] | None, kind: str, seen_at: float | None) -> IndexSummary:
        """One pipeline run, on the Indexer's thread (so never two at once)."""
        options = engine.index_options(
            self.config,
            self.config.db,
            faults=self.config.faults,
            only=only,
            cancel=self._cancel,
            publish=self._reload_early,
        )
        self.indexing = kind
        started = time.monotonic()
        try:
            summary = run_index(options, self.model)
        except GbrError:
            self.metrics.inc("gbr_index_runs_total", kind=kind, outcome="failed")
            raise
        finally:
            self.indexing = None
            if kind == "full":
                self.first_pass.set()
        assert self.searcher is not None
        self._reload_wanted.clear()
        self.searcher.reload()
        if kind == "full":
            self.recovering = None  # the new index is whole
        if self.filler is not None:
            self.filler.pass_done()
        elapsed = time.monotonic() - started
        self._record_run(kind, summary, elapsed)
        if seen_at is not None:
            lag = time.monotonic() - seen_at
            self.metrics.observe("gbr_change_to_searchable_seconds", lag)
            log().info(
                "changes_searchable",
                seconds=round(lag, 3),
                indexed=summary.files_indexed,
                removed=summary.files_removed,
                dropped=summary.files_dropped,
            )
        return summary

    def _reload_early(self, _writer: Store) -> None:
        """A pass's chunks are in (or more vectors are): the next query reloads the vectors,
        so searches see them before the pass ends (BM25 over all, dense over the embedded).

        The reload is left to a request thread: done here, on the pass's writer thread, it
        would leave a cursor behind for every pass (ThreadLocalStore keeps one per thread).
        """
        self._reload_wanted.set()

    def _busy(self) -> bool:
        """A pass is running, or the first one has not finished."""
        return self.indexing is not None or not self.first_pass.is_set()

    def _searcher(self) -> Searcher:
        """The searcher for a request (which puts off the second opinion's fill)."""
        if self.filler is not None:
            self.filler.requested()
        return self._current_searcher()

    def _current_searcher(self) -> Searcher:
        """The searcher, its vectors reloaded first when a pass in progress asked for it."""
        assert self.searcher is not None
        if self._reload_wanted.is_set():
            self._reload_wanted.clear()
            self.searcher.reload()
        return self.searcher

    def _record_run(self, kind: str, summary: IndexSummary, elapsed: float) -> None:
        m = self.metrics
        m.inc("gbr_index_runs_total", kind=kind, outcome="ok")
        m.observe("gbr_index_run_seconds", elapsed, kind=kind)
        m.inc("gbr_files_indexed_total", summary.files_indexed)
        m.inc("gbr_files_removed_total", summary.files_removed)
        for problem in summary.dropped:
            m.inc("gbr_files_dropped_total", kind=problem.kind)
            if problem.kind == "parse_failed":
                m.inc("gbr_parse_failures_total")
        self.pipeline_restarts += summary.restarts
        self.pipeline_dead_letters += summary.dead_letters
        self.last_batch = {"kind": kind, **summary.as_dict()}

    def index_all(self, timeout: float | None = None) -> IndexSummary:
        """A full pass through the Indexer, after whatever it is doing; waits for it."""
        if self.indexer is None:
            raise DaemonError("the daemon is not running its indexer; restart it")
        future: Future[IndexSummary] = Future()
        self._waiting.add(future)
        try:
            self.indexer.tell(IndexEverything("requested over HTTP", reply=future))
            return future.result(timeout)
        finally:
            self._waiting.discard(future)

    def _dead_letter(self, child: str, message: Any, error: BaseException | None) -> None:
        reply = getattr(message, "reply", None)
        if isinstance(reply, Future) and not reply.done():
            reply.set_exception(
                SupervisionError(f"the {child} crashed twice on this request ({error}); retry it")
            )

    def _gave_up(self, child: str, error: BaseException | None) -> None:
        log().error("daemon_degraded", actor=child, error=str(error))

    # ----------------------------------------------------------------- queries

    def search(self, query: str, k: int, mode: Mode, where: Filter) -> Found:
        """The hits, and a hint when a filter excludes everything (`search --json`)."""
        assert self.store is not None
        request = SearchRequest(query, k, mode, where).check()
        try:
            return engine.search(self._searcher(), request)
        except IndexEmptyError:
            if not self.first_pass.is_set():
                raise IndexEmptyError(
                    f"the index is still empty: the daemon is indexing {self.config.root} now; "
                    "try again in a moment"
                ) from None
            raise

    def plan_ask(
        self,
        question: str,
        options: AskOptions,
        provider: str | None,
        model: str | None,
        history: Sequence[Message] = (),
        client_env: Mapping[str, str] | None = None,
    ) -> AskPlan:
        """Resolve the provider and the Oracle first, so a bad name is a 400, not a stream.

        `history` goes to the Oracle as a local chat sends it, which fits it to the budget.
        `client_env`: the asking client's provider variables, used instead of the daemon's
        (gbr.daemon.oracles says why).
        """
        request = AskRequest(question, options, LlmChoice(provider, model), tuple(history))
        request.check()
        oracle, missing = self.oracles.get(request.llm, options, self._searcher(), client_env)
        return AskPlan(question, options, oracle, missing, tuple(request.history))

    def check_llm(
        self,
        provider: str | None,
        model: str | None,
        client_env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Which provider and model an /ask with these names (and `client_env`, the client's
        provider variables) would use; calls nothing. A missing key is an answer here
        (`configured` false), an unknown provider name a ConfigError.
        """
        try:
            llm = open_provider(
                LlmChoice(provider, model), settings_env(self.config.env, client_env)
            )
        except MissingKeyError as exc:
            return {"provider": exc.provider, "model": None, "configured": False, "error": str(exc)}
        try:
            return {"provider": llm.name, "model": llm.model, "configured": True, "error": None}
        finally:
            close_provider(llm)

    def own_llm(self) -> dict[str, Any]:
        """The provider, model and base URL an ask that brings no settings is answered with
        (never the key), for `status`; read once, as the daemon's environment is."""
        if self._own_llm is None:
            try:
                llm = open_provider(LlmChoice(), self.config.env)
            except GbrError as exc:
                self._own_llm = {"provider": None, "model": None, "base_url": None}
                self._own_llm["error"] = str(exc)
                return self._own_llm
            try:
                from gbr.core.llm.http_provider import safe_url

                url = getattr(getattr(llm, "settings", None), "base_url", None)
                base_url = safe_url(url) if isinstance(url, str) else None  # no user info
                self._own_llm = {"provider": llm.name, "model": llm.model, "base_url": base_url}
                self._own_llm["error"] = None
            finally:
                close_provider(llm)
        return self._own_llm

    def run_ask(
        self,
        plan: AskPlan,
        on_token: TokenSink | None = None,
        cancel: threading.Event | None = None,
        on_context: ContextSink | None = None,
    ) -> AskOutcome:
        """Answer through the Oracle actor; provider failures come back in the outcome."""
        started = time.monotonic()
        cancel = cancel or threading.Event()
        with self._answering_lock:
            self._answering.add(cancel)
        if self._cancel.is_set():  # shutdown began: an answer now would hold the exit
            cancel.set()
        try:
            answer: Answer = ask_oracle(
                plan.oracle,
                AskQuestion(
                    plan.question,
                    plan.options,
                    on_token,
                    plan.history,
                    cancel=cancel,
                    on_context=on_context,
                ),
            )
        finally:
            with self._answering_lock:
                self._answering.discard(cancel)
        self.metrics.observe("gbr_ask_seconds", time.monotonic() - started)
        outcome = outcome_of(answer, plan.options.dry_run, plan.missing)
        if answer.cancelled and self._cancel.is_set() and outcome.error is None:
            # Cut by the shutdown, not by its client: it must not pass for a whole answer.
            cut = "the daemon stopped while answering; the answer is cut short, ask again"
            outcome = replace(
                outcome,
                answer={**outcome.answer, "error": cut},
                result=answer if outcome.result is None else replace(outcome.result, error=cut),
                error=cut,
                exit_code=DaemonError.exit_code,
            )
        if plan.history:  # only then: an /ask without history answers exactly as before
            sent = {"history_sent": answer.history_sent, "history_trimmed": answer.history_trimmed}
            outcome = replace(outcome, answer={**outcome.answer, **sent})
        return outcome

    # ------------------------------------------------------------------ status

    def health(self) -> dict[str, Any]:
        """Liveness (always 200: the daemon answers) and whether all of it works.

        `status` is "degraded" while a part is down or was given up on; `degraded` lists
        each such part with its state and the reason: the watcher (restarting, or failed for
        good: saves are no longer seen), the indexer (writes failing: changes are kept and
        retried), or an actor the supervisor gave up on.
        """
        parts = degraded(self)
        return {
            "status": "degraded" if parts else "ok",
            "pid": self.pid,
            "version": __version__,
            "degraded": parts,
        }

    def queue_depth(self) -> int:
        ref = self.indexer.actor_ref if self.indexer is not None else None
        return queued(ref)

    def restarts(self) -> int:
        return self.supervisor.restarts + self.pipeline_restarts

    def status(self) -> dict[str, Any]:
        """The `status --json` object, plus what only a running daemon knows."""
        assert self.store is not None
        report = status_report(self.store)
        report.update(
            {
                "pid": self.pid,
                "host": self.host,
                "port": self.port,
                "started_at": self.started_at,
                "uptime_seconds": self.uptime(),
                "watcher": self.watcher.state,
                "watcher_error": self.watcher.error,
                "watcher_restarts": self.watcher.restarts,
                "problems": degraded(self),
                "indexing": self.indexing,
                "ready": self.first_pass.is_set(),
                "queue_depth": self.queue_depth(),
                "restarts": self.restarts(),
                "dead_letters": self.supervisor.dead_letters + self.pipeline_dead_letters,
                "degraded": str(self.supervisor.given_up) if self.supervisor.given_up else None,
                "last_batch": self.last_batch,
                "llm": self.own_llm(),
            }
        )
        shown: dict[str, Any] = printable(report)
        return shown

    def uptime(self) -> float:
        return round(time.monotonic() - self._started, 3)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
