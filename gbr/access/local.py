"""The index used from this process: `LocalIndex`, the in-process side of `CodeIndex`.

By default the DuckDB file is opened for the length of a call and closed afterwards, and
an answer lets it go as soon as retrieval ends: a long-lived process (an editor keeps an
MCP server for hours) must never hold the file when `gleambrctl serve` or `gleambrctl
index` needs to write it. A chat keeps it open between questions instead (`keep_open`),
and closes it only to index. The embedding model is loaded once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gbr.access import engine
from gbr.access.base import Found, LlmChoice
from gbr.access.discovery import lock_held
from gbr.access.requests import AskRequest, SearchRequest
from gbr.core.errors import DaemonError, IndexBusyError, StoreError
from gbr.core.paths import default_db, package_root
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.sizes import DEFAULT_MAX_BYTES
from gbr.core.store.facade import status_report
from gbr.core.store.snapshot import open_for_reading

# What only ask, index and graph questions use is imported where they use it: a cold
# `search` loads neither the actors (pykka), the LLM providers nor the graph answers.
if TYPE_CHECKING:
    import numpy as np
    import pykka

    from gbr.access.answering import Answering, AnsweringKey
    from gbr.actors.oracle import AskQuestion
    from gbr.actors.supervisor import Supervisor
    from gbr.core.answer.oracle import Answer, AskOptions, AskOutcome, Oracle, TokenSink
    from gbr.core.embed.cache_config import CacheConfig
    from gbr.core.embed.embedder import OnnxEmbedder
    from gbr.core.records import IndexSummary, ProgressCallback
    from gbr.core.store.facade import Store
    from gbr.core.store.test_words import TestWords


class _SharedExclusive:
    """Many readers or one writer: DuckDB refuses a read-write connection in a process that
    has a read-only one open on the same file, so a reindex waits for searches to finish."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing and self._readers == 0)
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


@dataclass(frozen=True)
class LocalSettings:
    root: Path
    db: Path | None = None  # None: the package's own (`default_db`), which follows `root`
    include_deps: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    ignore: tuple[str, ...] = ()
    follow_outside_links: bool = False
    # The shared embed cache (None: off); the front doors pass PackageConfig's.
    embed_cache: CacheConfig | None = None
    test_words: TestWords | None = None  # GBR_TEST_WORDS, as PackageConfig resolved it
    keep_open: bool = False
    """Keep the index open between calls (a chat, `search -`); closed only to index."""
    cancel_on_ctrl_c: bool = False
    """Ctrl-C while answering stops the stream and returns what came (a chat), instead of
    ending the call."""
    serving: bool = False
    """A front door that answers many queries (a chat, `search -`): the searcher held
    between calls (`keep_open`) also holds BM25's postings (engine.open_searcher)."""


class LocalIndex:
    """The index file opened in this process; the embedding model is loaded once."""

    via: str | None = None

    def __init__(
        self,
        settings: LocalSettings,
        load_model: Callable[[], OnnxEmbedder],
        *,
        env: Mapping[str, str],
    ) -> None:
        self.settings = settings
        self._load_model = load_model
        self._env = env
        self._ranking = Ranking.default(env)
        self._model: OnnxEmbedder | None = None
        self._model_lock = threading.Lock()
        self._access = _SharedExclusive()
        # With keep_open, between calls: the store, and its searcher once a call needed one.
        self._held: tuple[Store, Searcher | None] | None = None
        self._answering: dict[AnsweringKey, Answering] = {}  # with keep_open
        # A cancelled answer still finishing in its actor, with the tree that runs it.
        self._pending: tuple[pykka.Future[Answer], Supervisor] | None = None

    @property
    def root(self) -> Path:
        return self.settings.root

    @property
    def env(self) -> Mapping[str, str]:
        """The environment the front door read once: provider keys, the daemon's token."""
        return self._env

    @property
    def db(self) -> Path:
        return self.settings.db or default_db(self.settings.root)

    @property
    def model(self) -> OnnxEmbedder:
        with self._model_lock:
            if self._model is None:
                self._model = self._load_model()
            return self._model

    def has_index(self) -> bool:
        """Whether there is an index file; a front door says in its own words what to do
        when there is none (reading one that is missing raises `StoreError`)."""
        return self.db.is_file()

    # -- reading --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Store]:
        """The index open for reading; status and graph questions need no model."""
        with contextlib.ExitStack() as stack:
            yield self._open_store(stack)

    def _open_for_reading(self, stack: contextlib.ExitStack) -> Searcher:
        """A searcher over the index (the model loaded on first use), open until `stack`
        closes; with `keep_open`, the one held between calls."""
        store = self._open_store(stack)
        if self._held is None:
            return self._searcher(store, held=False)
        searcher = self._held[1]
        if searcher is None:
            searcher = self._searcher(store, held=True)
            self._held = (store, searcher)
        return searcher

    def _searcher(self, store: Store, held: bool) -> Searcher:
        """The model is loaded at the first query to embed. Only a searcher held between
        calls may serve many queries: one made per call would read the postings for nothing."""
        return engine.open_searcher(
            store,
            _ModelOnFirstUse(self),
            self._ranking,
            db=store.path,
            serving=held and self.settings.serving,
        )

    def _open_store(self, stack: contextlib.ExitStack) -> Store:
        """The store, open until `stack` closes (and no reindex meanwhile); with
        `keep_open`, the one held between calls."""
        self._settle()
        if self._held is not None:
            return self._held[0]
        db = self.db
        if not self.settings.keep_open:
            stack.enter_context(self._access.shared())
        try:
            store = open_for_reading(db)
        except IndexBusyError:
            raise
        except StoreError:
            if db.is_file() and lock_held(db):  # between a daemon's lock and its daemon.json
                raise DaemonError(
                    f"a daemon is starting or stopping for {db}; try again in a moment"
                ) from None
            raise
        if self.settings.keep_open:
            self._held = (store, None)
        else:
            stack.callback(store.close)
        return store

    def _let_go(self) -> None:
        if self._held is not None:
            store, searcher = self._held
            if searcher is not None:
                searcher.close()  # its background reads end before the store closes
            store.close()
            self._held = None

    def search(self, request: SearchRequest) -> Found:
        request.check()
        with contextlib.ExitStack() as stack:
            return engine.search(self._open_for_reading(stack), request)

    def status(self) -> dict[str, Any]:
        with self._reading() as store:
            return status_report(store)

    def indexed_root(self) -> str | None:
        """The folder the index was built from, as the index records it (with `--db`
        elsewhere, not `root`); what `--json` output is stamped with."""
        with self._reading() as store:
            return store.meta().get("root")

    def graph(self, op: str, name: str | None, depth: int = 1) -> dict[str, Any]:
        from gbr.core.graph.questions import answer

        with self._reading() as store:
            return answer(store, op, name, depth)

    # -- questions ------------------------------------------------------------------------------

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        from gbr.access.answering import open_provider

        provider = open_provider(llm, self._env)
        try:
            return provider.name, provider.model
        finally:
            provider.close()

    def ask(self, request: AskRequest, on_token: TokenSink | None = None) -> AskOutcome:
        """Answer through an Oracle actor made for this question, from the provider and
        reranker `llm` resolves to (a chat keeps those between questions)."""
        from gbr.actors.oracle import AskQuestion, ask_once
        from gbr.core.answer.oracle import outcome_of

        question, options, llm, history = request.check().parts()
        answering = self._answering_for(llm, options)
        try:
            with contextlib.ExitStack() as reading:
                oracle = answering.oracle(self._open_for_reading(reading))
                if self.settings.cancel_on_ctrl_c:
                    cancel = threading.Event()
                    asked = AskQuestion(question, options, on_token, tuple(history), cancel)
                    answer = self._answer_cancellable(oracle, asked)
                else:
                    # The file is let go as soon as retrieval ends, not after the LLM's
                    # answer: a daemon or `gleambrctl index` may need to write it meanwhile.
                    asked = AskQuestion(
                        question, options, on_token, tuple(history), on_context=_close(reading)
                    )
                    answer = ask_once(oracle, asked)
        finally:
            if not self.settings.keep_open:
                answering.close()
        return outcome_of(answer, options.dry_run, answering.missing)

    def _answering_for(self, llm: LlmChoice, options: AskOptions) -> Answering:
        from gbr.access.answering import answering_key, resolve

        if not self.settings.keep_open:
            return resolve(llm, options, self._env)
        key = answering_key(llm, options.rerank, options.dry_run)
        if key not in self._answering:
            answering = resolve(llm, options, self._env)
            if answering.missing is not None:
                return answering  # looked up again next time: it may be configured by then
            self._answering[key] = answering
        return self._answering[key]

    def _answer_cancellable(self, oracle: Oracle, asked: AskQuestion) -> Answer:
        """The answer from a new Oracle actor; Ctrl-C sets `asked.cancel` and waits for
        what came. The Oracle is made per question, so no other thread's object changes."""
        from gbr.actors.oracle import ask_later, start_oracle
        from gbr.actors.supervisor import Supervisor

        supervisor = Supervisor()
        future = ask_later(start_oracle(supervisor, oracle), asked)
        self._pending = (future, supervisor)
        try:
            answer: Answer = future.get()
        except KeyboardInterrupt:
            assert asked.cancel is not None
            asked.cancel.set()
            # The actor stops at its next delta (`answer.cancelled`), or had just finished;
            # a second Ctrl-C stops waiting, and the next call waits instead (`_settle`).
            answer = future.get()
        except BaseException:
            self._settle()
            raise
        self._settle()
        return answer

    def _settle(self) -> None:
        """Wait for a cancelled answer that is still finishing: one user of the index at a time.

        Interrupted again, it stays pending, and the next call waits for it instead.
        """
        if self._pending is not None:
            future, supervisor = self._pending
            with contextlib.suppress(Exception):  # its outcome was already reported
                future.get()
            self._pending = None
            supervisor.stop_all(timeout=5)

    # -- indexing -------------------------------------------------------------------------------

    def index(
        self,
        path: Path | None = None,
        progress: ProgressCallback | None = None,
        *,
        rebuild: bool = False,
    ) -> IndexSummary:
        """A staged pass (readers keep the last complete index); with `path`, over its
        package, which this index then follows; with `rebuild`, from the source tree alone
        (readers keep the old index until the new one is complete)."""
        from gbr.actors.pipeline import run_index

        root = package_root(path) if path is not None else self.root
        if root != self.root:
            self.settings = replace(self.settings, root=root)
        options = engine.index_options(self.settings, self.db, staged=True, fresh=rebuild)
        model = self.model
        self._settle()
        self._let_go()  # DuckDB allows one writer, and no reader beside it in this process
        with self._access.exclusive():
            return run_index(options, model, progress=progress)

    def close(self) -> None:
        self._settle()
        for answering in self._answering.values():
            answering.close()
        self._answering.clear()
        self._let_go()


class _ModelOnFirstUse:
    """The index's model, loaded when a query is first embedded: a `--mode bm25` search
    embeds nothing, and loading the model was a third of its cold run."""

    def __init__(self, index: LocalIndex) -> None:
        self._index = index

    @property
    def model_id(self) -> str:
        return self._index.model.model_id

    @property
    def dim(self) -> int:
        return self._index.model.dim

    @property
    def max_tokens(self) -> int:
        return self._index.model.max_tokens

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self._index.model.embed_batch(texts)

    def count_tokens(self, text: str) -> int:
        return self._index.model.count_tokens(text)


def _close(stack: contextlib.ExitStack) -> Callable[[Answer], None]:
    return lambda _: stack.close()
