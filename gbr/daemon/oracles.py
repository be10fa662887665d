"""The daemon's Oracle actors: one per (provider, model, reranker) asked for, in a small LRU.

A model name is free text, so the actors cannot be kept one per name for ever: the least
recently used one is stopped when a new kind would pass MAX_ORACLES, and its provider is
closed only once the answer it may be streaming is done.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from gbr.access import Answering, LlmChoice, open_provider, open_reranker
from gbr.actors.oracle import OracleActor
from gbr.actors.supervisor import ChildRef, Supervisor
from gbr.core.llm.base import LlmProvider
from gbr.core.rank.search import Searcher
from gbr.core.telemetry import log

# (with an LLM, provider, model, reranker): the names as asked, None meaning the default.
OracleKey = tuple[bool, str | None, str | None, str | None]
NO_LLM: OracleKey = (False, None, None, None)  # dry runs, and asks with no provider set up

MAX_ORACLES = 8  # distinct (provider, model, reranker) actors kept; the oldest unused goes


class Oracles:
    """Owns the Oracle actors and their providers; the daemon's supervisor runs them."""

    def __init__(self, supervisor: Supervisor, env: Mapping[str, str]) -> None:
        self._supervisor = supervisor
        self._env = env
        self._oracles: dict[OracleKey, tuple[ChildRef, LlmProvider | None]] = {}
        self._lock = threading.Lock()
        self._serial = 0

    def __len__(self) -> int:
        return len(self._oracles)

    def get(self, key: OracleKey, searcher: Searcher) -> ChildRef:
        """One supervised Oracle actor per (provider, model, reranker), made on first use.

        Each answers one question at a time, so two asks of one kind queue. A provider that
        lacked its key is looked up again next time, since it may have been configured since.
        """
        with self._lock:
            known = self._oracles.pop(key, None)
            if known is not None:
                self._oracles[key] = known  # now the most recently used
                return known[0]
            with_llm, provider_name, model, spec = key
            llm = open_provider(LlmChoice(provider_name, model), self._env) if with_llm else None
            reranker = open_reranker(bool(spec), spec, llm, self._env)
            oracle = Answering(llm, reranker).oracle(searcher)
            self._serial += 1
            name = f"oracle-{self._serial}"
            supervisor = self._supervisor
            child = supervisor.start_child(
                name, lambda: OracleActor.start(supervisor, name, oracle=oracle)
            )
            self._oracles[key] = (child, llm)
            while len(self._oracles) > MAX_ORACLES:
                self._forget(next(iter(self._oracles)))
            log().info(
                "oracle_started",
                actor=name,
                provider=llm.name if llm else None,
                model=llm.model if llm else None,
                reranker=spec,
            )
            return child

    def _forget(self, key: OracleKey) -> None:
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
