"""The HTTP machinery every provider shares: retries, error translation and SSE streaming.

A subclass only speaks its wire format: the URL, the headers, the request body, and what one
stream event means (`_read_event`). Everything that can go wrong on the way is handled here,
once, and surfaces as a `ProviderError` whose message names the provider and the fix.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from gbr import __version__
from gbr.core.errors import (
    AnswerLimitError,
    ConfigError,
    ProviderAuthError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from gbr.core.lazy import lazy_module
from gbr.core.llm.base import Message, ProviderSettings
from gbr.core.llm.retry import Backoff, is_retryable
from gbr.core.llm.sse import iter_sse
from gbr.core.telemetry import log

if TYPE_CHECKING:
    import httpx
else:
    httpx = lazy_module("httpx")  # loaded when first used

_DETAIL_CHARS = 200
_MIN_SECRET_CHARS = 8
E = TypeVar("E", bound=ProviderError)


class Delta(NamedTuple):
    """What one stream event carried: text to show, and whether the answer is complete."""

    text: str
    finished: bool = False
    refused: str | None = None
    """Why the provider declined to answer (a safety block, say): the stream fails after `text`."""


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment: the parts a secret could hide in."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        return "(an unparseable URL)"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class HttpProvider:
    """A chat provider reached over HTTP that streams server-sent events."""

    # Where this provider's settings come from; `registry.resolve_settings` reads them.
    key_env: ClassVar[str | None] = None
    base_url_env: ClassVar[str | None] = None
    model_env: ClassVar[str | None] = None
    default_base_url: ClassVar[str] = ""
    default_model: ClassVar[str] = ""
    key_required: ClassVar[bool] = True
    wire_format: ClassVar[str] = ""
    description: ClassVar[str] = ""
    """How the "nothing configured" message names a provider that needs no key."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        backoff: Backoff | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.model = settings.model
        self._backoff = backoff or Backoff()
        self._client = httpx.Client(
            transport=transport, headers={"user-agent": f"gbr/{__version__}"}
        )

    # -- what subclasses provide ------------------------------------------------------------

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(
        self, messages: Sequence[Message], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _read_event(self, data: str) -> Delta:
        raise NotImplementedError

    # -- the public API ---------------------------------------------------------------------

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.2,
        until: float | None = None,
    ) -> Iterator[str]:
        """Yield the answer's text deltas as they arrive.

        Failures before the first delta are retried; after it they are raised as they come,
        since a retry would repeat text the caller has already shown. Past `until`
        (time.monotonic) the stream stops with AnswerLimitError: no read waits beyond it,
        and keep-alive comments or empty events do not stretch it.
        """
        # Built now, not on first iteration, so bad messages fail where the call is made.
        body = self._body(messages, max_tokens, temperature)
        return self._stream(body, until)

    def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> str:
        """The whole answer at once (the stream, joined)."""
        return "".join(self.stream(messages, max_tokens=max_tokens, temperature=temperature))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, model={self.model!r}, "
            f"base_url={safe_url(self.settings.base_url)!r})"
        )

    # -- streaming ----------------------------------------------------------------------------

    def _stream(self, body: dict[str, Any], until: float | None = None) -> Iterator[str]:
        with self._open(body, until) as response:
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that ignored `stream: true`, or a proxy's error page with a 200.
                self._json(response.read().decode("utf-8", "replace"))
                raise self._unexpected("one JSON body instead of an event stream")
            finished = shown = False
            try:
                for event in iter_sse(_before(response.iter_text(), until, self._past)):
                    if event.is_done:
                        finished = True
                        break
                    delta = self._read_event(event.data)
                    if delta.text:
                        shown = True
                        yield delta.text
                    if delta.refused is not None:
                        raise self._refusal(delta.refused, partial=shown)
                    finished = finished or delta.finished
            except httpx.TimeoutException as exc:
                if not finished:
                    if _passed(until):
                        raise self._past() from exc
                    raise self._error(
                        ProviderTimeoutError, self._timeout_message(response)
                    ) from exc
            except httpx.HTTPError as exc:  # dropped connection, bad chunking or compression
                if not finished:
                    raise self._error(ProviderResponseError, self._cut_message()) from exc
        if not finished:
            raise self._error(ProviderResponseError, self._cut_message())

    @contextmanager
    def _open(self, body: dict[str, Any], until: float | None = None) -> Iterator[httpx.Response]:
        """Send the request, retrying 429, 5xx and connect failures within the deadline;
        no wait, read or retry goes past `until` (the answer's own deadline)."""
        settings, backoff = self.settings, self._backoff
        start = backoff.clock()
        attempt = 0
        while True:
            attempt += 1
            remaining = settings.deadline - (backoff.clock() - start)
            if until is not None:
                remaining = min(remaining, until - time.monotonic())
                if remaining <= 0:
                    raise self._past()
            timeout = max(0.001, min(settings.timeout, remaining))
            status: int | None = None
            retry_after: str | None = None
            failure: httpx.TransportError | None = None
            try:
                request = self._client.build_request(
                    "POST", self._url(), json=body, headers=self._headers(), timeout=timeout
                )
                response = self._client.send(request, stream=True)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise self._bad_url() from exc
            except httpx.ConnectTimeout as exc:
                failure = exc
            except httpx.TimeoutException as exc:
                if _passed(until):
                    raise self._past() from exc
                # The server took the request and went quiet: trying again would double the wait.
                raise self._error(
                    ProviderTimeoutError, self._timeout_message(None, timeout)
                ) from exc
            except httpx.TransportError as exc:
                failure = exc
            else:
                if response.is_success:
                    try:
                        yield response
                    finally:
                        response.close()
                    return
                status = response.status_code
                retry_after = response.headers.get("retry-after")
                error_body = self._error_body(response)
                if not is_retryable(status):
                    raise self._status_error(status, error_body)

            elapsed = backoff.clock() - start
            delay = backoff.delay(attempt, retry_after)
            if attempt > settings.max_retries or elapsed + delay >= settings.deadline:
                raise self._exhausted(status, failure, attempt, elapsed, delay) from failure
            if until is not None and time.monotonic() + delay >= until:
                raise self._past() from failure
            log().warning(
                "llm_retry",
                provider=self.name,
                model=self.model,
                status=status,
                error=type(failure).__name__ if failure else None,
                attempt=attempt,
                delay=round(delay, 3),
            )
            backoff.sleep(delay)

    # -- reading events -----------------------------------------------------------------------

    def _json(self, data: str) -> dict[str, Any]:
        """One event's JSON object; an `error` object in it becomes a ProviderResponseError."""
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise self._error(
                ProviderResponseError,
                f"{self.name} sent a reply that is not valid JSON; ask again, and if it "
                f"persists check that {safe_url(self.settings.base_url)} speaks the "
                f"{self.wire_format} format",
            ) from exc
        if not isinstance(payload, dict):
            raise self._unexpected(f"a JSON {type(payload).__name__} instead of an object")
        if payload.get("error"):
            detail = _detail_of(payload)
            raise self._error(
                ProviderResponseError, f"{self.name} reported an error: {detail}; ask again"
            )
        return payload

    def _unexpected(self, what: str) -> ProviderResponseError:
        return self._error(
            ProviderResponseError,
            f"{self.name} sent an unexpected response ({what}); ask again, and if it persists "
            f"check that {safe_url(self.settings.base_url)} speaks the {self.wire_format} format",
        )

    # -- errors ---------------------------------------------------------------------------------

    def _error(self, cls: type[E], message: str) -> E:
        """The error, its message on one line and scrubbed of the key whatever the source."""
        key = self.settings.api_key
        # Real keys run to dozens of characters; scrubbing a 3-letter test key would garble words.
        if key and len(key) >= _MIN_SECRET_CHARS:
            message = message.replace(key, "***")
        return cls(" ".join(message.split()), provider=self.name)

    def _hint(self, var: str | None, what: str) -> str:
        return var or f"the {self.name} {what}"

    def _error_body(self, response: httpx.Response) -> Any:
        """An error reply's body: parsed JSON, else its text ("" when it cannot be read)."""
        try:
            raw = response.read()
        except httpx.HTTPError:
            return ""
        finally:
            response.close()
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _key_rejection(self, status: int, body: Any) -> str | None:
        """What in an error reply says the key was refused ("401"), or None if nothing does."""
        return str(status) if status in (401, 403) else None

    def _status_error(self, status: int, body: Any) -> ProviderError:
        detail = _detail_of(body)
        suffix = f": {detail}" if detail else ""
        key_env = self._hint(self.key_env, "API key")
        model_env = self._hint(self.model_env, "model name")
        base_url_env = self._hint(self.base_url_env, "base URL")
        rejection = self._key_rejection(status, body)
        if rejection is not None:
            if self.settings.api_key:
                message = (
                    f"{self.name} rejected the API key ({rejection}); set a valid one in "
                    f"{key_env} (or api_key under [{self.name}] in the gbr config.toml)"
                )
            else:
                message = f"{self.name} refused a request without an API key ({rejection}); "
                message += f"set {key_env}"
            return self._error(ProviderAuthError, message)
        if status == 404:
            return self._error(
                ProviderResponseError,
                f"{self.name} has no model {self.model!r} at "
                f"{safe_url(self.settings.base_url)} (404{suffix}); check {model_env} "
                f"and {base_url_env}",
            )
        return self._error(
            ProviderResponseError,
            f"{self.name} refused the request (HTTP {status}{suffix}); check the model "
            f"({model_env}) and the size of the question",
        )

    def _exhausted(
        self,
        status: int | None,
        failure: httpx.TransportError | None,
        attempts: int,
        elapsed: float,
        next_delay: float,
    ) -> ProviderError:
        tried = f"{attempts} attempt{'s' if attempts > 1 else ''} in {elapsed:.1f}s"
        if status == 429:
            return self._error(
                ProviderRateLimitError,
                f"{self.name} is still rate-limiting requests (429) after {tried}; wait "
                f"{math.ceil(next_delay)}s and ask again, or pick another with --provider",
            )
        if status is not None:
            return self._error(
                ProviderUnavailableError,
                f"{self.name} kept failing (HTTP {status}) after {tried}; try again later, "
                f"or pick another with --provider",
            )
        where = safe_url(self.settings.base_url)
        base_url_env = self._hint(self.base_url_env, "base URL")
        if isinstance(failure, httpx.ConnectTimeout):
            return self._error(
                ProviderTimeoutError,
                f"could not connect to {self.name} at {where} within "
                f"{self.settings.timeout:g}s ({tried}); check the network and {base_url_env}",
            )
        reason = str(failure) or type(failure).__name__
        return self._error(
            ProviderUnavailableError,
            f"cannot reach {self.name} at {where} ({reason}; {tried}); check that the server "
            f"is up and that {base_url_env} is right",
        )

    def _bad_url(self) -> ConfigError:
        # Not retried: `localhost:11434` without `http://` fails the same way every time.
        base_url_env = self._hint(self.base_url_env, "base URL")
        return ConfigError(
            f"the {self.name} base URL {safe_url(self.settings.base_url)!r} is not a valid "
            f"http(s) URL; fix {base_url_env}"
        )

    def _timeout_message(
        self, response: httpx.Response | None, timeout: float | None = None
    ) -> str:
        if timeout is None and response is not None:
            timeout = response.request.extensions.get("timeout", {}).get("read")
        seconds = f"{timeout:g}s" if timeout else "the timeout"
        return (
            f"{self.name} sent nothing for {seconds}; ask again with a longer --timeout (or "
            f"`timeout` under [{self.name}] in the gbr config.toml)"
        )

    def _past(self) -> AnswerLimitError:
        return self._error(AnswerLimitError, f"{self.name} was still answering at the deadline")

    def _refusal(self, reason: str, *, partial: bool) -> ProviderResponseError:
        if partial:
            message = (
                f"{self.name} stopped its answer midway ({reason}); the text so far is partial, "
                f"rephrase the question and ask again"
            )
        else:
            message = (
                f"{self.name} refused to answer ({reason}); rephrase the question and ask again"
            )
        return self._error(ProviderResponseError, message)

    def _cut_message(self) -> str:
        return (
            f"{self.name} stopped streaming before the answer was complete; the text so far is "
            f"partial, ask again"
        )


def _passed(until: float | None) -> bool:
    return until is not None and time.monotonic() >= until


def _before(
    pieces: Iterator[str], until: float | None, past: Callable[[], Exception]
) -> Iterator[str]:
    """The stream's text as received, ended by `past()` once `until` has passed: checked on
    every piece, keep-alive comments included, so a trickle cannot stretch the answer."""
    for piece in pieces:
        if _passed(until):
            raise past()
        yield piece


def _detail_of(payload: Any) -> str:
    """The human part of an error body: OpenAI, Groq, Gemini and Ollama all nest it differently."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(error, dict):
        error = error.get("message") or error.get("status") or error.get("code") or ""
    return _shorten(str(error))


def _shorten(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"
