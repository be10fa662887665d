"""The index used from this process, one call at a time (`ask` without a daemon, MCP).

The DuckDB file is opened for the length of a call and closed afterwards, and an answer lets
it go as soon as retrieval ends: a long-lived process (an editor keeps an MCP server for
hours) must never hold the file when `gleambrctl serve` or `gleambrctl index` needs to
write it. The embedding model is loaded once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gbr.actors.oracle import AskQuestion, ask_once
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embedder import OnnxEmbedder
from gbr.core.errors import DaemonError, IndexEmptyError, MissingKeyError, StoreError
from gbr.core.filter_hint import add_filter_hint
from gbr.core.llm import LlmProvider, get_provider
from gbr.core.oracle import AskOptions, AskOutcome, Oracle, TokenSink, outcome_of
from gbr.core.records import ProgressCallback
from gbr.core.rerank import ask_reranker_spec, load_reranker
from gbr.core.search import Filter, Mode, Searcher, search_json
from gbr.core.snapshot import open_for_reading
from gbr.core.store import Store, status_report
from gbr.core.walker import DEFAULT_MAX_BYTES
from gbr.daemon.discovery import lock_held


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


@dataclass
class LocalSettings:
    root: Path
    db: Path
    include_deps: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    ignore: tuple[str, ...] = ()


class LocalIndex:
    """The index file opened per call in this process; the embedding model is loaded once."""

    via = "in-process"

    def __init__(self, settings: LocalSettings, load_model: Callable[[], OnnxEmbedder]) -> None:
        self.settings = settings
        self._load_model = load_model
        self._model: OnnxEmbedder | None = None
        self._model_lock = threading.Lock()
        self._access = _SharedExclusive()

    @property
    def model(self) -> OnnxEmbedder:
        with self._model_lock:
            if self._model is None:
                self._model = self._load_model()
            return self._model

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Store]:
        with contextlib.ExitStack() as stack:
            yield self._open_for_reading(stack)

    def _open_for_reading(self, stack: contextlib.ExitStack) -> Store:
        """The index opened read-only until `stack` closes (and no reindex meanwhile)."""
        db = self.settings.db
        stack.enter_context(self._access.shared())
        if not db.is_file():
            raise IndexEmptyError(
                f"{self.settings.root} has no index yet; call the reindex tool "
                f"(or run `gleambrctl index {self.settings.root}`)"
            )
        try:
            return stack.enter_context(open_for_reading(db))
        except StoreError:
            if lock_held(db):  # between a daemon's lock and its daemon.json, either way
                raise DaemonError(
                    f"a daemon is starting or stopping for {db}; try again in a moment"
                ) from None
            raise

    def search(self, query: str, k: int, mode: Mode, where: Filter) -> dict[str, Any]:
        model = self.model
        with self._reading() as store:
            hits = Searcher(store, model).search(query, k, mode, where)
            return add_filter_hint(search_json(query, mode, hits), store, where)

    def ask(
        self,
        question: str,
        options: AskOptions,
        provider: str | None,
        model: str | None,
        *,
        on_token: TokenSink | None = None,
        reranker: str | None = None,
        timeout: float | None = None,
    ) -> AskOutcome:
        """Answer through a short-lived Oracle actor. `reranker` names the one `--rerank`
        uses (default: `ask_reranker_spec`); `timeout` is per LLM request."""
        llm: LlmProvider | None = None
        missing: MissingKeyError | None = None
        if not options.dry_run:
            try:
                llm = get_provider(provider, model=model, timeout=timeout)
            except MissingKeyError as exc:
                missing = exc
        try:
            spec = ask_reranker_spec(options.rerank, reranker, llm, os.environ)
            chosen = load_reranker(spec, llm)
            embedder = self.model
            with contextlib.ExitStack() as reading:
                store = self._open_for_reading(reading)
                oracle = Oracle(Searcher(store, embedder), llm, chosen)
                # The file is let go as soon as retrieval ends, not after the LLM's answer:
                # a daemon or `gleambrctl index` may need to write it meanwhile.
                asked = AskQuestion(
                    question, options, on_token, on_context=lambda _: reading.close()
                )
                answer = ask_once(oracle, asked)
        finally:
            close = getattr(llm, "close", None)
            if close is not None:
                close()
        return outcome_of(answer, options.dry_run, missing)

    def status(self) -> dict[str, Any]:
        with self._reading() as store:
            return status_report(store)

    def reindex(self, progress: ProgressCallback | None) -> dict[str, Any]:
        s = self.settings
        options = IndexOptions(
            root=s.root,
            db=s.db,
            include_deps=s.include_deps,
            max_bytes=s.max_bytes,
            ignore=s.ignore,
            staged=True,
        )
        model = self.model
        with self._access.exclusive():
            return run_index(options, model, progress=progress).as_dict()
