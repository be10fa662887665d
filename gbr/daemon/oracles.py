"""The daemon's Oracle actors: one per kind of answering asked for, in a small LRU.

What a question is answered with is resolved as a local ask resolves it
(gbr.access.answering), and told apart by the same key.


A model name is free text, so the actors cannot be kept one per name for ever: the least
recently used one is stopped when a new kind would pass MAX_ORACLES, and its provider is
closed only once the answer it may be streaming is done.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from gbr.access.answering import Answering, AnsweringKey, answering_key, resolve
from gbr.access.base import LlmChoice
from gbr.actors.oracle import OracleActor
from gbr.actors.supervisor import ChildRef, Supervisor
from gbr.core.answer.oracle import AskOptions
from gbr.core.errors import MissingKeyError
from gbr.core.llm.base import LlmProvider
from gbr.core.rank.search import Searcher
from gbr.core.telemetry import log

MAX_ORACLES = 8  # distinct kinds of answering kept as actors; the oldest unused goes


class Oracles:
    """Owns the Oracle actors and their providers; the daemon's supervisor runs them."""

    def __init__(self, supervisor: Supervisor, env: Mapping[str, str]) -> None:
        self._supervisor = supervisor
        self._env = env
        self._oracles: dict[AnsweringKey, tuple[ChildRef, LlmProvider | None]] = {}
        self._lock = threading.Lock()
        self._serial = 0

    def __len__(self) -> int:
        return len(self._oracles)

    def get(
        self, llm: LlmChoice, options: AskOptions, searcher: Searcher
    ) -> tuple[ChildRef, MissingKeyError | None]:
        """The supervised Oracle actor for this kind of answering, made on first use, and
        why there is no provider when one was wanted (the answer is then retrieval alone).

        Each answers one question at a time, so two asks of one kind queue. A provider that
        lacked its key is looked up again next time, since it may have been configured since.
        """
        key = answering_key(llm, options.rerank, options.dry_run)
        with self._lock:
            child = self._known(key)
            if child is not None:
                return child, None
            answering = resolve(llm, options, self._env)
            missing = answering.missing
            if missing is not None:
                key = answering_key(llm, options.rerank, dry_run=True)
                child = self._known(key)
                if child is not None:
                    answering.close()
                    return child, missing
            return self._start(key, answering, searcher), missing

    def _known(self, key: AnsweringKey) -> ChildRef | None:
        known = self._oracles.pop(key, None)
        if known is None:
            return None
        self._oracles[key] = known  # now the most recently used
        return known[0]

    def _start(self, key: AnsweringKey, answering: Answering, searcher: Searcher) -> ChildRef:
        oracle = answering.oracle(searcher)
        self._serial += 1
        name = f"oracle-{self._serial}"
        supervisor = self._supervisor
        child = supervisor.start_child(
            name, lambda: OracleActor.start(supervisor, name, oracle=oracle)
        )
        llm = answering.provider
        self._oracles[key] = (child, llm)
        while len(self._oracles) > MAX_ORACLES:
            self._forget(next(iter(self._oracles)))
        log().info(
            "oracle_started",
            actor=name,
            provider=llm.name if llm else None,
            model=llm.model if llm else None,
            reranker=answering.reranker.name if answering.reranker else None,
        )
        return child

    def _forget(self, key: AnsweringKey) -> None:
        """Stop an Oracle actor; its provider closes only once the answer in hand is done."""
        child, llm = self._oracles.pop(key)
        ref = child.actor_ref
        self._supervisor.stop_child(child)
        if ref is None or llm is None:
            close_provider(llm)
            return

        def close_when_stopped() -> None:
            ref.actor_stopped.wait()
            close_provider(llm)

        threading.Thread(target=close_when_stopped, name="gbr-oracle-close", daemon=True).start()

    def children(self) -> list[ChildRef]:
        with self._lock:
            return [child for child, _ in self._oracles.values()]

    def close(self) -> None:
        """Close every provider; called once the supervisor has stopped the actors."""
        for _, llm in self._oracles.values():
            close_provider(llm)


def close_provider(llm: LlmProvider | None) -> None:
    if llm is not None:
        llm.close()
