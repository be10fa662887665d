"""The index served by a running daemon (`gleambrctl serve`): `RemoteIndex`, over its HTTP API.

While a daemon runs, DuckDB lets only it open the index, and it holds the LLM keys, the
writer and the warm searcher; so every front door that finds one asks it for everything.
Hits and answers come back as the same records a `LocalIndex` gives, a provider failure is
the outcome's `error`, and (for a chat) Ctrl-C cancels a stream.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gbr.access.base import Found, LlmChoice
from gbr.access.client import DaemonClient, ask_body, bounded_history
from gbr.access.requests import AskRequest, SearchRequest
from gbr.core.answer.oracle import Answer, AskOutcome, TokenSink
from gbr.core.errors import ConfigError, MissingKeyError
from gbr.core.records import IndexSummary, Progress, ProgressCallback


class RemoteIndex:
    """Search, ask, index and status through a `DaemonClient`; nothing is opened here."""

    def __init__(
        self, client: DaemonClient, root: Path | None = None, cancel_on_ctrl_c: bool = False
    ) -> None:
        self._client = client
        self.root = Path(client.info.root)
        self._asked_root = root or self.root  # the package the caller means to index
        self.via: str | None = f"daemon pid {client.info.pid} at {client.info.url}"
        self._cancel_on_ctrl_c = cancel_on_ctrl_c

    @property
    def db(self) -> Path:
        return Path(self._client.info.db)

    @property
    def pid(self) -> int:
        return self._client.info.pid

    def has_index(self) -> bool:
        """Always: a daemon opens its index at start and keeps it current (during its first
        pass, searches say to wait)."""
        return True

    def search(self, request: SearchRequest) -> Found:
        where = request.check().where
        body = {
            "query": request.query,
            "k": request.k,
            "mode": request.mode,
            "path": where.path,
            "module": where.module,
            "kinds": list(where.kinds),
            "tests": where.tests,
        }
        return Found.from_dict(self._client.search(body))

    def ask(self, request: AskRequest, on_token: TokenSink | None = None) -> AskOutcome:
        """The daemon's answer; `llm.timeout` and `llm.reranker` are the daemon's own."""
        question, options, llm, history = request.check().parts()
        sent = bounded_history(history)
        body = ask_body(question, options, llm.provider, llm.model)
        parts: list[str] = []
        context: list[dict[str, Any]] = []

        def token(delta: str) -> None:
            parts.append(delta)
            if on_token is not None:
                on_token(delta)

        try:
            data = self._client.ask(body, token, history=sent, on_context=context.extend)
        except KeyboardInterrupt:
            if not self._cancel_on_ctrl_c:
                raise
            # Leaving the stream closed the connection; the daemon then stops the LLM's
            # stream at its next delta. The chunks came first, so /context still works.
            cut = replace(
                Answer.from_dict({"question": question, "chunks": context}),
                text="".join(parts),
                cancelled=True,
            )
            return AskOutcome(cut.as_dict(), result=cut)
        code = int(data.pop("exit_code", 0))
        answer = Answer.from_dict(data)
        trimmed = sum(m.role != "system" for m in history) - len(sent)
        answer = replace(answer, history_trimmed=answer.history_trimmed + trimmed)
        return AskOutcome(data, data.get("error") if code else None, code, result=answer)

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        """Resolved by the daemon, which holds the keys: this process's environment is moot."""
        data = self._client.llm(llm.provider, llm.model)
        if not data.get("configured"):
            raise MissingKeyError(str(data.get("error")), provider=data.get("provider"))
        return str(data["provider"]), str(data["model"])

    def index(
        self, path: Path | None = None, progress: ProgressCallback | None = None
    ) -> IndexSummary:
        """A full pass by the daemon, which owns the writer and indexes only its own root.

        The daemon sends no progress, so `progress` hears twice: at the start with nothing
        known (a bar at a terminal then pulses, as before a walk ends), and at the end.
        """
        info = self._client.info
        wanted = path if path is not None else self._asked_root
        if not info.serves(wanted):
            raise ConfigError(
                f"the daemon (pid {info.pid}) indexes {info.root} only; stop it to index "
                f"{wanted} here, or pass --db with another index file"
            )
        started = time.monotonic()
        if progress is not None:
            progress(Progress(done=0, expected=None, chunks=0, dropped=0, elapsed=0.0))
        summary = IndexSummary.from_dict(self._client.index())
        if progress is not None:
            progress(
                Progress(
                    done=summary.files_seen,
                    expected=summary.files_seen,
                    chunks=summary.chunks,
                    dropped=summary.files_dropped,
                    elapsed=time.monotonic() - started,
                )
            )
        return summary

    def status(self) -> dict[str, Any]:
        """`status --json`, plus pid, uptime, watcher, restarts and queue depth."""
        return self._client.status()

    def indexed_root(self) -> str | None:
        return str(self.root)  # a daemon serves the package it indexes

    def graph(self, op: str, name: str | None, depth: int = 1) -> dict[str, Any]:
        return self._client.graph(op, name, depth)

    def close(self) -> None:
        self._client.close()
