"""Where a chat's work happens: `ChatBackend` is the seam, `LocalBackend` does it in-process.

A chat session only renders and keeps state; searching, answering and indexing go through a
backend. `LocalBackend` opens the index itself and answers through the supervised Oracle
actor, as `gleambrctl ask` does; `DaemonBackend` (daemon_backend.py) asks the daemon that
serves the package, and the session does not notice.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gbr.actors.oracle import AskQuestion, ask_later, start_oracle
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.actors.supervisor import ChildRef, Supervisor
from gbr.core import telemetry
from gbr.core.embedder import OnnxEmbedder
from gbr.core.errors import IndexEmptyError, MissingKeyError, StoreError
from gbr.core.llm import LlmProvider, Message, get_provider
from gbr.core.oracle import Answer, AskOptions, Oracle, TokenSink
from gbr.core.paths import default_db, package_root
from gbr.core.records import Hit, IndexSummary, ProgressCallback
from gbr.core.rerank import Reranker, ask_reranker_spec, load_reranker
from gbr.core.search import Searcher
from gbr.core.snapshot import open_for_reading
from gbr.core.store import Store, status_report

NO_INDEX = "no index yet; type /index"


@dataclass(frozen=True, slots=True)
class LlmChoice:
    """Which provider and model answer; None means the first configured, and its default."""

    provider: str | None = None
    model: str | None = None
    timeout: float | None = None


class ChatBackend(Protocol):
    root: Path
    via: str | None
    """Where the work runs when not in this process (said once, in the greeting)."""

    @property
    def db(self) -> Path: ...

    def has_index(self) -> bool: ...

    def search(self, query: str, k: int) -> list[Hit]: ...

    def ask(
        self,
        question: str,
        options: AskOptions,
        llm: LlmChoice,
        history: Sequence[Message],
        on_token: TokenSink,
    ) -> Answer:
        """Answer, streaming to `on_token`. Ctrl-C cancels the stream and returns what came;
        the answer then says `cancelled`. A missing or failing provider is `answer.error`."""
        ...

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        """(provider, model) that `llm` resolves to; raises the GbrError that says why not."""
        ...

    def index(self, path: Path | None, progress: ProgressCallback | None) -> IndexSummary: ...

    def status(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class LocalBackend:
    """The index opened read-only in this process, the model loaded once, the Oracle actor."""

    via: str | None = None

    def __init__(
        self,
        root: Path,
        load_model: Callable[[], OnnxEmbedder],
        db: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root.resolve()
        self._fixed_db = db
        self._load_model = load_model
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._model: OnnxEmbedder | None = None
        self._store: Store | None = None
        self._searcher: Searcher | None = None
        self._supervisor: Supervisor | None = None
        self._oracle_child: ChildRef | None = None
        self._oracle: Oracle | None = None
        self._providers: dict[LlmChoice, LlmProvider] = {}
        self._rerankers: dict[tuple[str, int], Reranker] = {}
        self._pending: Any = None  # a cancelled answer still finishing in the actor
        self._open_error: StoreError | None = None
        telemetry.configure(self.db.parent / "events.jsonl")
        self._open()

    # -- the index ------------------------------------------------------------------------------

    @property
    def db(self) -> Path:
        return self._fixed_db or default_db(self.root)

    @property
    def model(self) -> OnnxEmbedder:
        if self._model is None:
            self._model = self._load_model()
        return self._model

    def has_index(self) -> bool:
        self._reopen_if_new()
        return self._store is not None

    def _reopen_if_new(self) -> None:
        """An index written since the session started (or unlocked since) is picked up."""
        if self._store is None and self.db.is_file():
            self._open()

    def _open(self) -> None:
        """Open the index if there is one; a locked or broken file is reported when used."""
        self._open_error = None
        if self.db.is_file():
            try:
                self._store = open_for_reading(self.db)
            except StoreError as exc:  # e.g. `gleambrctl index` is writing it right now
                self._open_error = exc
            self._searcher = None  # built on first use: it loads the model and the vectors

    def _close_store(self) -> None:
        self._searcher = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def _search_ready(self) -> Searcher:
        self._settle()
        self._reopen_if_new()
        if self._store is None:
            raise self._open_error or IndexEmptyError(NO_INDEX)
        if self._searcher is None:
            self._searcher = Searcher(self._store, self.model)
        return self._searcher

    def search(self, query: str, k: int) -> list[Hit]:
        return self._search_ready().search(query, k)

    def index(self, path: Path | None, progress: ProgressCallback | None) -> IndexSummary:
        """Close the read-only connection, run the pipeline, reopen: DuckDB allows one writer."""
        root = package_root(path or self.root)
        self._settle()
        self._close_store()
        self.root = root  # the session follows the package it indexed
        try:
            options = IndexOptions(root=root, db=self.db, staged=True)
            return run_index(options, self.model, progress=progress)
        finally:
            self._open()

    def status(self) -> dict[str, Any]:
        self._settle()
        self._reopen_if_new()
        if self._store is None:
            return {"root": str(self.root), "db": str(self.db), "indexed": False}
        return {**status_report(self._store), "root": str(self.root), "indexed": True}

    # -- questions ------------------------------------------------------------------------------

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        provider = self._provider(llm)
        return provider.name, provider.model

    def _provider(self, llm: LlmChoice) -> LlmProvider:
        if llm not in self._providers:
            self._providers[llm] = get_provider(
                llm.provider, model=llm.model, env=self._env, timeout=llm.timeout
            )
        return self._providers[llm]

    def _reranker(self, provider: LlmProvider | None) -> Reranker | None:
        """As `ask --rerank` picks: a local cross-encoder when its folder is set, else the LLM."""
        spec = ask_reranker_spec(True, None, provider, self._env)
        if spec is None:
            return None  # nothing to rerank with; retrieval order stands
        key = (spec, id(provider))
        if key not in self._rerankers:
            reranker = load_reranker(spec, provider)
            assert reranker is not None
            self._rerankers[key] = reranker
        return self._rerankers[key]

    def ask(
        self,
        question: str,
        options: AskOptions,
        llm: LlmChoice,
        history: Sequence[Message],
        on_token: TokenSink,
    ) -> Answer:
        searcher = self._search_ready()
        missing: MissingKeyError | None = None
        provider: LlmProvider | None = None
        try:
            provider = self._provider(llm)
        except MissingKeyError as exc:
            missing = exc
        oracle = self._oracle_for(searcher)
        # The actor is idle (see _settle), so its Oracle can be re-pointed from this thread.
        oracle.searcher, oracle.provider = searcher, provider
        oracle.reranker = self._reranker(provider) if options.rerank else None
        cancel = threading.Event()
        assert self._oracle_child is not None
        future = ask_later(
            self._oracle_child,
            AskQuestion(question, options, on_token, tuple(history), cancel),
        )
        try:
            answer: Answer = future.get()
        except KeyboardInterrupt:
            cancel.set()
            self._pending = future
            # The actor stops at its next delta (`answer.cancelled`), or had just finished;
            # a second Ctrl-C stops waiting, and the next call waits instead (`_settle`).
            answer = future.get()
            self._pending = None
        if missing is not None:
            answer.error = str(missing)
        return answer

    def _oracle_for(self, searcher: Searcher) -> Oracle:
        if self._oracle is None:
            self._oracle = Oracle(searcher, None)
            self._supervisor = Supervisor()
            self._oracle_child = start_oracle(self._supervisor, self._oracle)
        return self._oracle

    def _settle(self) -> None:
        """Wait for a cancelled answer that is still finishing: one user of the index at a time.

        Interrupted again, it stays pending, and the next call waits for it instead.
        """
        if self._pending is not None:
            with contextlib.suppress(Exception):  # its outcome was already reported as cancelled
                self._pending.get()
            self._pending = None

    def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop_all(timeout=5)
        for provider in self._providers.values():
            close = getattr(provider, "close", None)
            if close is not None:
                close()
        self._close_store()
