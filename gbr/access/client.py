"""A small synchronous client for the daemon's HTTP API, for the CLI and other tools.

Each method returns the same JSON object the matching `gleambrctl ... --json` prints, and
every failure is a `GbrError`: the daemon's own errors come back as the class it names
(so a `ConfigError` still exits 2), a refused token is a `ConfigError` naming GBR_TOKEN,
and a daemon that stopped answering is a `DaemonError`.

    info = find_daemon(db)
    if info is not None:
        with DaemonClient(info) as client:
            print(client.search({"query": "parse an isbn", "k": 5}))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gbr.access.discovery import DaemonInfo
from gbr.core import errors
from gbr.core.environ import TOKEN
from gbr.core.errors import ConfigError, DaemonError, GbrError
from gbr.core.lazy import lazy_module

if TYPE_CHECKING:
    import httpx

    from gbr.core.answer.oracle import AskOptions
    from gbr.core.llm.base import Message
else:
    httpx = lazy_module("httpx")  # loaded when first used

TOKEN_ENV = TOKEN.name
# Reads: a search is milliseconds, but the daemon may be busy embedding a big batch.
READ_TIMEOUT = 120.0
# What /ask takes as `history` (app.py enforces it): a chat keeps far less, and the Oracle
# fits what it gets to the budget anyway; the caps only keep one request from being huge.
HISTORY_MAX_MESSAGES = 100
HISTORY_MAX_CHARS = 20_000  # per message
# The asking shell's provider variables (keys, base URLs, models), as a JSON object: an /ask
# or /llm that carries them is answered with them instead of the daemon's own. A header,
# not the body or the URL, so that no access log or echoed request body ever holds a key.
PROVIDER_ENV_HEADER = "x-gbr-provider-env"


def shell_provider_env(env: Mapping[str, str]) -> dict[str, str]:
    """The provider variables `env` sets (blank ones count as unset, as for a local ask)."""
    from gbr.core.llm import provider_env_vars

    return {var: env[var] for var in provider_env_vars() if env.get(var, "").strip()}


class DaemonClient:
    def __init__(
        self,
        info: DaemonInfo,
        token: str | None = None,
        timeout: float = READ_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`env`: the caller's environment, whose provider variables go with each /ask and
        /llm (none set: the daemon answers with its own)."""
        self.info = info
        self._env = env or {}
        headers = {"authorization": f"Bearer {token}"} if token else {}
        # trust_env=False: an HTTP(S)_PROXY meant for the internet must not catch loopback.
        self._http = httpx.Client(
            base_url=info.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=5.0),
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the API

    def status(self) -> dict[str, Any]:
        """`status --json`, plus pid, uptime, watcher, restarts and queue depth."""
        return self._json("GET", "/status")

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        """`search --json` for a body like {"query": "...", "k": 10, "mode": "hybrid"}."""
        return self._json("POST", "/search", body)

    def index(self) -> dict[str, Any]:
        """A full pass (it waits for the daemon's current batch first); `index --json`."""
        return self._json("POST", "/index", {}, timeout=None)

    def graph(self, op: str, name: str | None, depth: int) -> dict[str, Any]:
        """`/graph/OP`: each route is a GET with the same parameters."""
        params = {"depth": str(depth)}
        if name:
            params["name"] = name
        return self._json("GET", f"/graph/{op}", params=params)

    def llm(self, provider: str | None = None, model: str | None = None) -> dict[str, Any]:
        """Which provider and model the daemon would answer with: {provider, model,
        configured, error}. Nothing is called; an unknown provider is a ConfigError."""
        params = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        return self._json("GET", "/llm", params=params, headers=self._provider_headers())

    def ask(
        self,
        body: dict[str, Any],
        on_token: Callable[[str], None] | None = None,
        history: Sequence[Message] = (),
        on_context: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> dict[str, Any]:
        """`ask --json`, streamed: each text delta goes to `on_token` as it arrives, and
        the chunks sent go to `on_context` before the first token.

        `history` is the conversation so far (user and assistant turns, oldest first),
        within HISTORY_MAX_MESSAGES and HISTORY_MAX_CHARS (see `bounded_history`). When the
        provider was missing or failed, the answer still carries the retrieved chunks, its
        `error` says why, and `exit_code` says what `gleambrctl ask` exits with. An
        interrupt (Ctrl-C) while streaming closes the connection, which cancels the answer.
        """
        from gbr.core.llm.sse import iter_sse  # gbr.core.llm loads every provider

        answer: dict[str, Any] | None = None
        failure: dict[str, Any] | None = None
        body = {**body, "stream": True}
        if history:
            body["history"] = [{"role": m.role, "content": m.content} for m in history]
        with self._stream("POST", "/ask", body, self._provider_headers()) as response:
            for event in iter_sse(response.iter_text()):
                data = _loads(event.data)
                if event.event == "token" and isinstance(data, str):
                    if on_token is not None:
                        on_token(data)
                elif event.event == "context" and isinstance(data, dict):
                    if on_context is not None:
                        on_context(list(data.get("chunks") or []))
                elif event.event == "answer" and isinstance(data, dict):
                    answer = data
                elif event.event == "error" and isinstance(data, dict):
                    failure = data
        if answer is None:
            if failure is not None:
                raise _error_class(None, DaemonError)(str(failure.get("error")))
            raise DaemonError(
                f"the daemon at {self.info.url} ended the answer stream early; run again"
            )
        if failure is not None:
            answer["error"] = failure.get("error")
            answer["exit_code"] = int(failure.get("exit_code") or 1)
        return answer

    # ------------------------------------------------------------------ plumbing

    def _provider_headers(self) -> dict[str, str]:
        settings = shell_provider_env(self._env)
        return {PROVIDER_ENV_HEADER: json.dumps(settings)} if settings else {}

    def _json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: Any = "client",  # the client's own; None: wait as long as it takes
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        if timeout == "client":  # httpx's marker for it, read only now: httpx loads lazily
            timeout = httpx.USE_CLIENT_DEFAULT
        try:
            response = self._http.request(
                method, path, json=body, timeout=timeout, params=params, headers=headers
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if response.status_code >= 400:
            raise self._error(response)
        data = _loads(response.text)
        if not isinstance(data, dict):
            raise DaemonError(f"the daemon at {self.info.url} sent a reply that is not JSON")
        return data

    @contextmanager
    def _stream(
        self, method: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Iterator[httpx.Response]:
        try:
            with self._http.stream(method, path, json=body, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self._error(response)
                yield response
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: httpx.HTTPError) -> DaemonError:
        return DaemonError(
            f"the daemon at {self.info.url} (pid {self.info.pid}) did not answer "
            f"({type(exc).__name__}: {exc}); check that it runs, or stop it and retry"
        )

    def _error(self, response: httpx.Response) -> GbrError:
        data = _loads(response.text)
        message = data.get("error") if isinstance(data, dict) else None
        kind = data.get("type") if isinstance(data, dict) else None
        if response.status_code == 401:
            return ConfigError(
                f"the daemon at {self.info.url} wants a token; set {TOKEN_ENV} to the token "
                "it was started with"
            )
        if not message:
            message = f"the daemon answered HTTP {response.status_code}"
        client_side = (400, 403, 404, 413, 415, 422)  # the request was wrong: exit 2, as locally
        fallback = ConfigError if response.status_code in client_side else DaemonError
        return _error_class(kind, fallback)(message)


def ask_body(
    question: str, options: AskOptions, provider: str | None, model: str | None
) -> dict[str, Any]:
    """The /ask request for what a local ask would be given; one mapping for every client."""
    return {
        "question": question,
        "k": options.max_chunks,
        "budget": options.budget,
        "rerank": options.rerank,
        "hyde": options.hyde,
        "dry_run": options.dry_run,
        "tests": options.tests,
        "graph_context": options.graph_context,
        "deadline": options.deadline,
        "max_answer_bytes": options.max_answer_bytes,
        "provider": provider,
        "model": model,
    }


def bounded_history(history: Sequence[Message]) -> list[Message]:
    """The newest whole turns of `history` that /ask accepts (its count and length caps).

    Turns are dropped oldest first and never split, as `fit_history` does with the budget;
    a turn with an empty message or one over the length cap ends the history there.
    """
    from gbr.core.answer.prompt import split_turns

    kept: list[list[Message]] = []
    count = 0
    for turn in reversed(split_turns(history)):
        unfit = any(not 0 < len(m.content) <= HISTORY_MAX_CHARS for m in turn)
        if unfit or count + len(turn) > HISTORY_MAX_MESSAGES:
            break
        kept.append(turn)
        count += len(turn)
    return [m for turn in reversed(kept) for m in turn]


def _error_class(name: Any, fallback: type[GbrError]) -> type[GbrError]:
    """The GbrError subclass the daemon named, so exit codes match a local run."""
    cls = getattr(errors, name, None) if isinstance(name, str) else None
    if isinstance(cls, type) and issubclass(cls, GbrError):
        return cls
    return fallback


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
