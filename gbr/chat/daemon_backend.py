"""A chat whose work is done by the daemon serving the package (`gleambrctl serve`).

While a daemon runs, DuckDB lets only it open the index, and it holds the LLM keys and the
writer; so a chat that finds one asks it for everything, over the same HTTP API as the CLI.
The session cannot tell this backend from `LocalBackend`: hits and answers come back as the
same records, a provider failure is `answer.error`, and Ctrl-C cancels a stream.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gbr.chat.backend import LlmChoice
from gbr.core.errors import ConfigError, MissingKeyError
from gbr.core.llm import Message
from gbr.core.oracle import Answer, AskOptions, TokenSink
from gbr.core.records import Hit, IndexSummary, Progress, ProgressCallback
from gbr.daemon.client import DaemonClient, ask_body, bounded_history


class DaemonBackend:
    """Search, ask, index and status through a `DaemonClient`; nothing is opened here."""

    def __init__(self, client: DaemonClient) -> None:
        self._client = client
        self.root = Path(client.info.root)
        self.via: str | None = f"via daemon pid {client.info.pid} at {client.info.url}"

    @property
    def db(self) -> Path:
        return Path(self._client.info.db)

    def has_index(self) -> bool:
        return bool(self.status()["indexed"])

    def search(self, query: str, k: int) -> list[Hit]:
        data = self._client.search({"query": query, "k": k})
        return [Hit.from_dict(hit) for hit in data["results"]]

    def ask(
        self,
        question: str,
        options: AskOptions,
        llm: LlmChoice,
        history: Sequence[Message],
        on_token: TokenSink,
    ) -> Answer:
        """The daemon's answer; `llm.timeout` is the daemon's own setting, as for `ask`."""
        sent = bounded_history(history)
        body = ask_body(question, options, llm.provider, llm.model)
        parts: list[str] = []
        context: list[dict[str, Any]] = []

        def token(delta: str) -> None:
            parts.append(delta)
            on_token(delta)

        try:
            data = self._client.ask(body, token, history=sent, on_context=context.extend)
        except KeyboardInterrupt:
            # Leaving the stream closed the connection; the daemon then stops the LLM's
            # stream at its next delta. The chunks came first, so /context still works.
            cut = Answer.from_dict({"question": question, "chunks": context})
            cut.text, cut.cancelled = "".join(parts), True
            return cut
        answer = Answer.from_dict(data)
        answer.history_trimmed += sum(m.role != "system" for m in history) - len(sent)
        return answer

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        """Resolved by the daemon, which holds the keys: this process's environment is moot."""
        data = self._client.llm(llm.provider, llm.model)
        if not data.get("configured"):
            raise MissingKeyError(str(data.get("error")), provider=data.get("provider"))
        return str(data["provider"]), str(data["model"])

    def index(self, path: Path | None, progress: ProgressCallback | None) -> IndexSummary:
        """A full pass by the daemon, which owns the writer and indexes only its own root.

        The daemon sends no progress, so `progress` hears twice: at the start with nothing
        known (a bar at a terminal then pulses, as before a walk ends), and at the end.
        """
        if path is not None and not self._client.info.serves(path):
            raise ConfigError(
                f"the daemon (pid {self._client.info.pid}) indexes {self.root} only; "
                f"stop it to index {path} from this chat"
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
        """The daemon's /status, with `indexed` as the chat reads it.

        A daemon always has its index: it opened it at start and keeps it current, so
        "type /index" is never the hint; during its first pass, searches say to wait.
        """
        return {**self._client.status(), "indexed": True}

    def close(self) -> None:
        self._client.close()
