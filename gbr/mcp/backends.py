"""Where an MCP tool call is answered: by the package's running daemon, or in this process.

The choice is made again for every call. A daemon started after the MCP server is used
from its next call on, and one that stopped is replaced by in-process work
(`gbr.local_index`, which holds the index file only while a call reads it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from gbr.core.errors import ConfigError
from gbr.core.oracle import AskOptions, AskOutcome
from gbr.core.records import ProgressCallback
from gbr.core.search import Filter, Mode
from gbr.daemon.client import DaemonClient, ask_body
from gbr.daemon.discovery import DaemonInfo, find_daemon
from gbr.local_index import LocalIndex


class CodeIndex(Protocol):
    """What the MCP tools need; every method returns the matching CLI `--json` object."""

    via: str  # "daemon pid N at URL" or "in-process", for the tool's text answer

    def search(self, query: str, k: int, mode: Mode, where: Filter) -> dict[str, Any]: ...

    def ask(
        self, question: str, options: AskOptions, provider: str | None, model: str | None
    ) -> AskOutcome: ...

    def status(self) -> dict[str, Any]: ...

    def reindex(self, progress: ProgressCallback | None) -> dict[str, Any]: ...


class DaemonIndex:
    """The daemon's HTTP API; it holds the writer, the watcher and the warm searcher."""

    def __init__(self, client: DaemonClient, root: Path) -> None:
        self._client = client
        self._root = root
        self.via = f"daemon pid {client.info.pid} at {client.info.url}"

    def search(self, query: str, k: int, mode: Mode, where: Filter) -> dict[str, Any]:
        body = {
            "query": query,
            "k": k,
            "mode": mode,
            "path": where.path,
            "module": where.module,
            "kinds": list(where.kinds),
        }
        return self._client.search(body)

    def ask(
        self, question: str, options: AskOptions, provider: str | None, model: str | None
    ) -> AskOutcome:
        data = self._client.ask(ask_body(question, options, provider, model))
        code = int(data.pop("exit_code", 0))
        return AskOutcome(data, data.get("error") if code else None, code)

    def status(self) -> dict[str, Any]:
        return self._client.status()

    def reindex(self, progress: ProgressCallback | None) -> dict[str, Any]:
        if not self._client.info.serves(self._root):
            raise ConfigError(
                f"the daemon for this index serves {self._client.info.root}, not {self._root}; "
                "stop it, or reindex through it from that folder"
            )
        return self._client.index()  # the daemon reports no progress over HTTP

    def close(self) -> None:
        self._client.close()


class IndexChooser:
    """Hands each call the daemon's API when one serves the DB, else the local index."""

    def __init__(
        self,
        local: LocalIndex,
        on_stale: Callable[[DaemonInfo | None, str], None] | None = None,
    ) -> None:
        self.local = local
        self._on_stale = on_stale

    @contextlib.contextmanager
    def current(self) -> Iterator[CodeIndex]:
        info = find_daemon(self.local.settings.db, on_stale=self._on_stale)
        if info is None:
            yield self.local
            return
        remote = DaemonIndex(DaemonClient(info), self.local.settings.root)
        try:
            yield remote
        finally:
            remote.close()
