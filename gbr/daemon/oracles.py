"""The daemon's Oracle actors: one per kind of answering asked for, in a small LRU.

What a question is answered with is resolved as a local ask resolves it
(gbr.access.answering), and told apart by the same key. A model name is free text, so the
actors cannot be kept one per name for ever: the least recently used one is stopped when a
new kind would pass MAX_ORACLES, and its provider is closed only once the answer it may be
streaming is done.

Whose provider settings: the asking shell's, when it sets any. A client sends the provider
variables of its environment (keys, base URLs, models: `provider_env_vars`) with each
/ask, and they replace the daemon's own for that question; a client that sets none is
answered with the daemon's. The daemon is the same user's, on loopback, behind its token,
so a key crossing to it goes nowhere it could not already be read; it is never logged, and
only a digest of the settings names the actor that holds them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping

from gbr.access.answering import Answering, AnsweringKey, answering_key, resolve
from gbr.access.base import LlmChoice
from gbr.actors.oracle import OracleActor
from gbr.actors.supervisor import ChildRef, Supervisor
from gbr.core.answer.oracle import AskOptions
from gbr.core.errors import ConfigError, MissingKeyError
from gbr.core.llm import provider_env_vars
from gbr.core.llm.base import LlmProvider
from gbr.core.rank.search import Searcher
from gbr.core.telemetry import log

# What tells two kinds of answering apart: what `resolve` reads, and a digest of the asking
# client's provider settings (None: the daemon's own).
OracleKey = tuple[AnsweringKey, str | None]
MAX_SETTING_CHARS = 4096  # one provider variable's value, as a client may send it


def parse_provider_env(raw: str | None) -> dict[str, str] | None:
    """The provider variables a client sent (the X-Gbr-Provider-Env header, a JSON object),
    or None when it sent none; anything else than provider variables is a ConfigError."""
    if raw is None or not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    known = set(provider_env_vars())
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(v) <= MAX_SETTING_CHARS
        for k, v in data.items()
    ):
        raise ConfigError(
            "the provider settings header must be a JSON object of provider variables to "
            "strings; send the variables gbr's providers read, or no header"
        )
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"not a provider variable: {', '.join(unknown[:3])}; send only "
            f"{', '.join(sorted(known))}"
        )
    return {k: v for k, v in data.items() if v.strip()} or None


def settings_env(own: Mapping[str, str], client: Mapping[str, str] | None) -> Mapping[str, str]:
    """The environment a provider is opened with: the daemon's, its provider variables
    replaced by the client's when the client sent any (never a mix of the two)."""
    if not client:
        return own
    known = set(provider_env_vars())
    return {**{k: v for k, v in own.items() if k not in known}, **client}


def settings_digest(client: Mapping[str, str] | None) -> str | None:
    """What tells two clients' settings apart in an OracleKey, without holding a key."""
    if not client:
        return None
    return hashlib.sha256(json.dumps(sorted(client.items())).encode()).hexdigest()[:16]


MAX_ORACLES = 8  # distinct kinds of answering kept as actors; the oldest unused goes


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

    def get(
        self,
        llm: LlmChoice,
        options: AskOptions,
        searcher: Searcher,
        client: Mapping[str, str] | None = None,
    ) -> tuple[ChildRef, MissingKeyError | None]:
        """The supervised Oracle actor for this kind of answering, made on first use, and
        why there is no provider when one was wanted (the answer is then retrieval alone);
        `client` is the asking client's provider variables.

        Each answers one question at a time, so two asks of one kind queue. A provider that
        lacked its key is looked up again next time, since it may have been configured since.
        """
        digest = settings_digest(client)
        key = (answering_key(llm, options.rerank, options.dry_run), digest)
        with self._lock:
            child = self._known(key)
            if child is not None:
                return child, None
            answering = resolve(llm, options, settings_env(self._env, client))
            missing = answering.missing
            if missing is not None:
                key = (answering_key(llm, options.rerank, dry_run=True), digest)
                child = self._known(key)
                if child is not None:
                    answering.close()
                    return child, missing
            return self._start(key, answering, searcher, client), missing

    def _known(self, key: OracleKey) -> ChildRef | None:
        known = self._oracles.pop(key, None)
        if known is None:
            return None
        self._oracles[key] = known  # now the most recently used
        return known[0]

    def _start(
        self,
        key: OracleKey,
        answering: Answering,
        searcher: Searcher,
        client: Mapping[str, str] | None,
    ) -> ChildRef:
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
            settings="client" if client else "daemon",
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
