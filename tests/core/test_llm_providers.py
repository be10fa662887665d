"""LLM providers against a real HTTP server on 127.0.0.1 that speaks their wire formats.

Retries run for real through the fake server; only the waits between them are injected, so a
test can assert "slept exactly what retry-after said" without sleeping it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from gbr.core.errors import (
    ConfigError,
    MissingKeyError,
    ProviderAuthError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from gbr.core.llm import Message, ProviderSettings, available, get_provider, is_configured
from gbr.core.llm.gemini import GeminiProvider
from gbr.core.llm.groq import GroqProvider
from gbr.core.llm.http_provider import HttpProvider, safe_url
from gbr.core.llm.openai_compat import OpenAICompatProvider
from gbr.core.llm.registry import ProviderRegistry, resolve_settings
from gbr.core.llm.retry import Backoff, is_retryable, parse_retry_after
from gbr.core.llm.sse import SseEvent, SseParser, iter_sse
from tests.fake_llm import FakeLlm, Reply

KEY = "gsk_TEST_SECRET_9f8e7d6c5b4a"
MESSAGES = [
    Message("system", "Answer from the given Gleam code only."),
    Message("user", "How do I map a list?"),
    Message("assistant", "Which module?"),
    Message("user", "gleam/list"),
]


@dataclass
class FakeTime:
    """A clock that moves only when slept on: retry pacing without real waiting."""

    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def backoff(self, **kwargs: Any) -> Backoff:
        return Backoff(sleep=self.sleep, rng=lambda: 0.5, clock=self.clock, **kwargs)


@dataclass(frozen=True)
class Wire:
    name: str
    cls: type[HttpProvider]
    base_url: Callable[[FakeLlm], str]
    path: str


WIRES = [
    Wire("openai", OpenAICompatProvider, lambda f: f.openai_base_url, "/v1/chat/completions"),
    Wire("groq", GroqProvider, lambda f: f.groq_base_url, "/openai/v1/chat/completions"),
    Wire(
        "gemini",
        GeminiProvider,
        lambda f: f.gemini_base_url,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
    ),
]
ENV_VAR = {"openai": "GBR_OPENAI_API_KEY", "groq": "GROQ_API_KEY", "gemini": "GEMINI_API_KEY"}


@pytest.fixture(params=WIRES, ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def make(
    fake_llm: FakeLlm, wire: Wire, fake_time: FakeTime
) -> Iterator[Callable[..., HttpProvider]]:
    """Build the wire's provider against the fake server, with injected pacing."""
    made: list[HttpProvider] = []

    def build(backoff: Backoff | None = None, **overrides: Any) -> HttpProvider:
        settings: dict[str, Any] = {
            "name": wire.name,
            "base_url": wire.base_url(fake_llm),
            "model": wire.cls.default_model,
            "timeout": 5.0,
            "deadline": 10.0,
            "api_key": KEY,
            **overrides,
        }
        provider = wire.cls(ProviderSettings(**settings), backoff=backoff or fake_time.backoff())
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def drain(stream: Iterator[str]) -> tuple[list[str], BaseException | None]:
    """The deltas a stream yielded before it ended or failed, and the failure."""
    seen: list[str] = []
    try:
        for delta in stream:
            seen.append(delta)
    except Exception as exc:
        return seen, exc
    return seen, None


# -- streaming and request shape ----------------------------------------------------------------


def test_streams_deltas_in_order_as_they_arrive(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider]
) -> None:
    pieces = ["Use ", "`list.map`", " from ", "gleam/list."]
    fake_llm.script(Reply(chunks=pieces, chunk_delay=[0, 0.1, 0.1, 0.1]))
    provider = make()
    arrivals: list[tuple[str, float]] = []
    for delta in provider.stream(MESSAGES):
        arrivals.append((delta, time.monotonic()))
    assert [d for d, _ in arrivals] == pieces
    # Text is handed over as it comes, not buffered to the end: the first delta arrived well
    # before the last one was sent.
    assert arrivals[-1][1] - arrivals[0][1] >= 0.25


def test_complete_joins_the_stream(fake_llm: FakeLlm, make: Callable[..., HttpProvider]) -> None:
    fake_llm.script(Reply("Use list.map on the list.", chunks=5))
    assert make().complete(MESSAGES) == "Use list.map on the list."


@pytest.mark.parametrize("wire", [w for w in WIRES if w.name != "gemini"], ids=lambda w: w.name)
def test_openai_format_request(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire
) -> None:
    list(make(model="some-model").stream(MESSAGES, max_tokens=321, temperature=0.4))
    (request,) = fake_llm.requests
    assert request.path == wire.path
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("gbr/")
    # Groq documents `max_completion_tokens` and deprecates `max_tokens`; a local server
    # (Ollama) would silently ignore the newer name, so it gets the older one.
    limit = "max_completion_tokens" if wire.name == "groq" else "max_tokens"
    assert request.json == {
        "model": "some-model",
        "messages": [{"role": m.role, "content": m.content} for m in MESSAGES],
        "stream": True,
        limit: 321,
        "temperature": 0.4,
    }


def test_openai_compatible_sends_no_authorization_without_a_key(fake_llm: FakeLlm) -> None:
    settings = ProviderSettings("openai", fake_llm.openai_base_url, "llama3.2", api_key=None)
    with OpenAICompatProvider(settings) as provider:
        assert provider.complete(MESSAGES) == fake_llm.default_answer
    assert "authorization" not in fake_llm.requests[0].headers


@pytest.mark.parametrize("wire", [w for w in WIRES if w.name == "gemini"], ids=lambda w: w.name)
def test_gemini_request(fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire) -> None:
    list(make().stream(MESSAGES, max_tokens=321, temperature=0.4))
    (request,) = fake_llm.requests
    assert request.path == wire.path
    assert request.query == {"alt": "sse"}  # and no `key=`: the key never rides in the URL
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.json == {
        "contents": [
            {"role": "user", "parts": [{"text": "How do I map a list?"}]},
            {"role": "model", "parts": [{"text": "Which module?"}]},
            {"role": "user", "parts": [{"text": "gleam/list"}]},
        ],
        "systemInstruction": {"parts": [{"text": "Answer from the given Gleam code only."}]},
        "generationConfig": {"temperature": 0.4, "maxOutputTokens": 321},
    }


def test_gemini_details(fake_llm: FakeLlm) -> None:
    settings = ProviderSettings("gemini", fake_llm.url, "models/gemini-2.5-pro", api_key=KEY)
    with GeminiProvider(settings) as provider:
        # No system prompt: no systemInstruction; a "models/" prefix is not doubled.
        list(provider.stream([Message("user", "hi")]))
        assert fake_llm.requests[0].path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
        assert "systemInstruction" not in fake_llm.requests[0].json
        with pytest.raises(ValueError, match="at least one user"):
            provider.stream([Message("system", "rules only")])
        # Reasoning parts are not the answer; a usage-only chunk carries nothing.
        fake_llm.script(
            Reply(
                raw_events=[
                    '{"candidates": [{"content": {"parts": [{"text": "hmm", "thought": true}]}}]}',
                    '{"candidates": [{"content": {"parts": [{"text": "Yes."}]}}]}',
                    '{"usageMetadata": {"totalTokenCount": 9}}',
                    '{"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]}',
                ]
            )
        )
        assert provider.complete([Message("user", "hi")]) == "Yes."
        fake_llm.script(Reply(raw_events=['{"promptFeedback": {"blockReason": "OTHER"}}']))
        with pytest.raises(
            ProviderResponseError, match=r"refused to answer \(the question was blocked: OTHER\)"
        ):
            provider.complete([Message("user", "hi")])


def test_lf_and_crlf_streams_read_alike(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider]
) -> None:
    fake_llm.script(Reply("one two three", chunks=3, crlf=True), Reply("one two three", crlf=False))
    provider = make()
    assert provider.complete(MESSAGES) == "one two three"
    assert provider.complete(MESSAGES) == "one two three"


# -- retries ------------------------------------------------------------------------------------


def test_429_waits_what_retry_after_says(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime
) -> None:
    fake_llm.script(Reply.error(429, retry_after="7"), Reply("ok now", chunks=2))
    provider = make()
    with structlog.testing.capture_logs() as events:
        assert provider.complete(MESSAGES) == "ok now"
    assert fake_time.sleeps == [7.0]
    assert len(fake_llm.requests) == 2
    retry = [e for e in events if e["event"] == "llm_retry"]
    assert retry == [
        {
            "event": "llm_retry",
            "log_level": "warning",
            "provider": provider.name,
            "model": provider.model,
            "status": 429,
            "error": None,
            "attempt": 1,
            "delay": 7.0,
        }
    ]


def test_retry_after_as_an_http_date(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime
) -> None:
    now = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    fake_llm.script(Reply.error(503, retry_after="Wed, 21 Oct 2015 07:28:03 GMT"))
    provider = make(backoff=fake_time.backoff(wall_clock=lambda: now))
    assert provider.complete(MESSAGES) == fake_llm.default_answer
    assert fake_time.sleeps == [3.0]


def test_500_then_success_backs_off(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime
) -> None:
    fake_llm.script(Reply.error(500), Reply.error(502), "fine")
    assert make().complete(MESSAGES) == "fine"
    # Equal jitter with rng()=0.5: three quarters of 0.5 s, then of 1 s.
    assert fake_time.sleeps == [0.375, 0.75]


def test_rate_limit_exhausted(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime, wire: Wire
) -> None:
    fake_llm.script(*[Reply.error(429, retry_after="1")] * 5)
    with pytest.raises(ProviderRateLimitError) as caught:
        make(max_retries=4).complete(MESSAGES)
    assert fake_time.sleeps == [1.0] * 4
    assert len(fake_llm.requests) == 5
    assert caught.value.provider == wire.name
    assert caught.value.exit_code == 4
    message = str(caught.value)
    assert message.startswith(f"{wire.name} is still rate-limiting requests (429) after 5")
    assert "\n" not in message


def test_server_errors_exhausted(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime, wire: Wire
) -> None:
    fake_llm.script(*[Reply.error(503)] * 3)
    with pytest.raises(ProviderUnavailableError, match=rf"^{wire.name} kept failing \(HTTP 503\)"):
        make(max_retries=2).complete(MESSAGES)
    assert len(fake_time.sleeps) == 2
    assert len(fake_llm.requests) == 3


def test_deadline_bounds_the_retries(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime
) -> None:
    fake_llm.script(*[Reply.error(429, retry_after="2")] * 10)
    with pytest.raises(ProviderRateLimitError):
        make(deadline=5.0, max_retries=10).complete(MESSAGES)
    # Attempts at t=0, 2 and 4; a third wait would end at 6, past the 5 s deadline.
    assert fake_time.sleeps == [2.0, 2.0]
    assert len(fake_llm.requests) == 3


def test_retry_after_beyond_the_deadline_fails_at_once(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], fake_time: FakeTime, wire: Wire
) -> None:
    fake_llm.script(Reply.error(429, retry_after="120"))
    with pytest.raises(ProviderRateLimitError, match="wait 120s and ask again"):
        make(deadline=60.0).complete(MESSAGES)
    assert fake_time.sleeps == []


def test_deadline_holds_in_real_time(fake_llm: FakeLlm, make: Callable[..., HttpProvider]) -> None:
    fake_llm.script(*[Reply.error(500)] * 50)
    provider = make(backoff=Backoff(initial=0.05), deadline=0.4, max_retries=50)
    start = time.monotonic()
    with pytest.raises(ProviderUnavailableError):
        provider.complete(MESSAGES)
    # Generous for a loaded machine, and still far below 50 attempts' backoff (many seconds).
    assert time.monotonic() - start < 2.0
    assert 2 < len(fake_llm.requests) < 50


def test_deadline_caps_a_slow_first_byte(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider]
) -> None:
    fake_llm.script(Reply(first_byte_delay=5.0))
    provider = make(backoff=Backoff(), timeout=5.0, deadline=0.2)
    start = time.monotonic()
    with pytest.raises(ProviderTimeoutError):
        provider.complete(MESSAGES)
    assert time.monotonic() - start < 2.5  # the 0.2 s deadline, not the 5 s timeout


def test_connection_refused(wire: Wire, fake_time: FakeTime) -> None:
    base = f"http://127.0.0.1:{closed_port()}" + ("/v1" if wire.name != "gemini" else "")
    settings = ProviderSettings(wire.name, base, "m", max_retries=3, api_key=KEY)
    with (
        wire.cls(settings, backoff=fake_time.backoff()) as provider,
        pytest.raises(ProviderUnavailableError) as caught,
    ):
        provider.complete(MESSAGES)
    assert len(fake_time.sleeps) == 3
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    message = str(caught.value)
    assert message.startswith(f"cannot reach {wire.name} at {base}")
    assert wire.cls.base_url_env in message


# -- failures that are not retried ---------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key(
    fake_llm: FakeLlm,
    make: Callable[..., HttpProvider],
    fake_time: FakeTime,
    wire: Wire,
    status: int,
) -> None:
    fake_llm.script(Reply.error(status))
    with pytest.raises(ProviderAuthError) as caught:
        make().complete(MESSAGES)
    assert str(caught.value) == (
        f"{wire.name} rejected the API key ({status}); set a valid one in {ENV_VAR[wire.name]} "
        f"(or api_key under [{wire.name}] in the gbr config.toml)"
    )
    assert fake_time.sleeps == []
    assert len(fake_llm.requests) == 1


def test_local_server_asking_for_a_key(fake_llm: FakeLlm) -> None:
    fake_llm.script(Reply.error(401))
    settings = ProviderSettings("openai", fake_llm.openai_base_url, "m")
    with OpenAICompatProvider(settings) as provider, pytest.raises(ProviderAuthError) as caught:
        provider.complete(MESSAGES)
    assert str(caught.value) == (
        "openai refused a request without an API key (401); set GBR_OPENAI_API_KEY"
    )


def test_unknown_model_and_bad_request(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire
) -> None:
    fake_llm.script(Reply.error(404), Reply.error(400, body='{"error": {"message": "too long"}}'))
    provider = make(model="no-such-model")
    with pytest.raises(ProviderResponseError, match="has no model 'no-such-model'") as caught:
        provider.complete(MESSAGES)
    assert wire.cls.model_env in str(caught.value)
    with pytest.raises(ProviderResponseError, match=r"refused the request \(HTTP 400: too long\)"):
        provider.complete(MESSAGES)


def test_timeout_before_the_first_byte(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire
) -> None:
    fake_llm.script(Reply(first_byte_delay=5.0))
    provider = make(timeout=0.1)  # before the clock starts: a client loads its CA bundle
    start = time.monotonic()
    with pytest.raises(ProviderTimeoutError) as caught:
        provider.complete(MESSAGES)
    assert time.monotonic() - start < 2.5  # the 0.1 s timeout, not the 5 s wait
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)
    assert str(caught.value).startswith(f"{wire.name} sent nothing for 0.1s;")
    assert len(fake_llm.requests) == 1  # a silent server is not asked twice


def test_timeout_mid_stream_keeps_the_text_so_far(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider]
) -> None:
    fake_llm.script(Reply(chunks=["a", "b", "c"], chunk_delay=[0, 0, 0.5]))
    seen, error = drain(make(timeout=0.15).stream(MESSAGES))
    assert seen == ["a", "b"]
    assert isinstance(error, ProviderTimeoutError)


def test_malformed_json(fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire) -> None:
    fake_llm.script(Reply(malformed=True))
    with pytest.raises(ProviderResponseError, match="not valid JSON") as caught:
        make().complete(MESSAGES)
    assert caught.value.provider == wire.name
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    "event",
    [
        '["a list"]',
        '{"choices": "nope", "candidates": "nope"}',
        '{"choices": [{"delta": {"content": 5}}], "candidates": [{"content": {"parts": 5}}]}',
    ],
)
def test_unexpected_shape(fake_llm: FakeLlm, make: Callable[..., HttpProvider], event: str) -> None:
    fake_llm.script(Reply(raw_events=[event]))
    with pytest.raises(ProviderResponseError, match="unexpected response"):
        make().complete(MESSAGES)


def test_error_event_mid_stream(fake_llm: FakeLlm, make: Callable[..., HttpProvider]) -> None:
    fake_llm.script(Reply(raw_events=['{"error": {"message": "model overloaded"}}']))
    with pytest.raises(ProviderResponseError, match="reported an error: model overloaded; ask"):
        make().complete(MESSAGES)


@pytest.mark.parametrize("cut", ["drop", "clean"])
def test_cut_stream_keeps_the_partial_text(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], cut: str
) -> None:
    fake_llm.script(Reply(chunks=["Hello", " wor", "ld"], cut_after=2, cut=cut))  # type: ignore[arg-type]
    seen, error = drain(make().stream(MESSAGES))
    assert seen == ["Hello", " wor"]
    assert isinstance(error, ProviderResponseError)
    assert "before the answer was complete" in str(error)
    assert len(fake_llm.requests) == 1  # never retried once text was shown


def test_stopping_early_closes_the_response(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider]
) -> None:
    fake_llm.script(Reply(chunks=["a", "b", "c"]), "second")
    provider = make()
    stream = provider.stream(MESSAGES)
    assert next(stream) == "a"
    stream.close()  # type: ignore[attr-defined]
    assert provider.complete(MESSAGES) == "second"


# -- secrets -------------------------------------------------------------------------------------


def test_the_key_is_never_shown(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], wire: Wire
) -> None:
    echoed = f'{{"error": {{"message": "key {KEY} is not valid here"}}}}'
    fake_llm.script(
        Reply.error(429, retry_after="1"),
        Reply.error(400, body=echoed),
        Reply(raw_events=[f'{{"error": {{"message": "bad {KEY}"}}}}']),
        Reply.error(401),
    )
    provider = make()
    messages: list[str] = []
    with structlog.testing.capture_logs() as events:
        for _ in range(3):
            with pytest.raises(ProviderError) as caught:
                provider.complete(MESSAGES)
            messages.append(str(caught.value))
            messages.append(repr(caught.value))
    refused = wire.cls(
        ProviderSettings(wire.name, f"http://127.0.0.1:{closed_port()}", "m", api_key=KEY),
        backoff=Backoff(sleep=lambda _: None),
    )
    with structlog.testing.capture_logs() as more, pytest.raises(ProviderError) as caught:
        refused.complete(MESSAGES)
    refused.close()
    messages.append(str(caught.value))
    assert "key *** is not valid here" in messages[0]
    assert any(e["event"] == "llm_retry" for e in events + more)
    shown = [*messages, *map(str, events + more), repr(provider), str(provider.settings)]
    shown.append(repr(provider.settings))
    assert all(KEY not in text for text in shown), shown


# -- registry ------------------------------------------------------------------------------------


def test_auto_pick_order() -> None:
    groq, gemini, local = (
        {"GROQ_API_KEY": KEY},
        {"GEMINI_API_KEY": KEY},
        {"GBR_OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    assert isinstance(get_provider(env={**local, **gemini, **groq}), GroqProvider)
    assert isinstance(get_provider(env={**local, **gemini}), GeminiProvider)
    assert isinstance(get_provider(env=local), OpenAICompatProvider)
    assert available() == ["groq", "gemini", "openai"]


def test_nothing_configured() -> None:
    with pytest.raises(MissingKeyError) as caught:
        get_provider(env={"GROQ_API_KEY": "  "})  # blank counts as unset
    assert str(caught.value) == (
        "no LLM provider is configured; set GROQ_API_KEY or GEMINI_API_KEY, "
        "or GBR_OPENAI_BASE_URL for a local OpenAI-compatible server"
    )
    assert caught.value.exit_code == 3
    assert isinstance(caught.value, ProviderError)
    assert caught.value.provider is None
    assert not is_configured({})


def test_named_provider_without_its_key() -> None:
    with pytest.raises(MissingKeyError, match=r"^gemini needs an API key; set GEMINI_API_KEY \(or"):
        get_provider("gemini", env={"GROQ_API_KEY": KEY})
    # A local server needs no key, and defaults to Ollama.
    provider = get_provider("openai", env={})
    assert provider.settings.base_url == "http://127.0.0.1:11434/v1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "alias", ["openai-compatible", "ollama", "llama.cpp", "OpenAI", " ollama "]
)
def test_aliases(alias: str) -> None:
    provider = get_provider(alias, env={})
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.name == "openai"


def test_unknown_provider() -> None:
    with pytest.raises(ConfigError) as caught:
        get_provider("claude", env={})
    assert str(caught.value) == (
        "unknown LLM provider 'claude'; choose one of: groq, gemini, openai "
        "(aliases: llama.cpp, ollama, openai-compatible)"
    )
    assert caught.value.exit_code == 2


def test_defaults_and_overrides() -> None:
    groq = resolve_settings("groq", env={"GROQ_API_KEY": KEY})
    assert (groq.base_url, groq.model) == (
        GroqProvider.default_base_url,
        "llama-3.3-70b-versatile",
    )
    assert (groq.timeout, groq.deadline, groq.max_retries) == (30.0, 60.0, 4)
    gemini = resolve_settings("gemini", env={"GEMINI_API_KEY": KEY}, timeout=45)
    assert gemini.base_url == GeminiProvider.default_base_url
    assert gemini.model == "gemini-2.0-flash"
    assert (gemini.timeout, gemini.deadline) == (45.0, 90.0)  # room for one retry
    env = {
        "GBR_OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "GBR_OPENAI_MODEL": "qwen",
        "GBR_OPENAI_API_KEY": KEY,
    }
    local = resolve_settings("ollama", env=env)
    assert (local.name, local.base_url, local.model, local.api_key) == (
        "openai",
        "http://127.0.0.1:8080/v1",
        "qwen",
        KEY,
    )
    assert resolve_settings("ollama", env=env, model="phi").model == "phi"


def test_config_file_and_env_precedence(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[groq]\napi_key = "file-key-123456"\nmodel = "file-model"\ntimeout = 12\n'
        '[gemini]\nbase_url = "http://127.0.0.1:8081"\n'
    )
    home = {"GBR_HOME": str(tmp_path)}
    from_file = resolve_settings("groq", env=home)
    assert (from_file.api_key, from_file.model, from_file.timeout) == (
        "file-key-123456",
        "file-model",
        12.0,
    )
    assert is_configured(home) and is_configured(home, name="groq")
    assert not is_configured(home, name="gemini")  # a base URL alone is not a key
    both = resolve_settings(
        "groq", env={**home, "GROQ_API_KEY": KEY, "GBR_GROQ_MODEL": "env-model"}
    )
    assert (both.api_key, both.model) == (KEY, "env-model")
    assert resolve_settings("groq", env=home, timeout=3).timeout == 3.0


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[groq\n", "is not valid TOML"),
        ('[groq]\napikey = "x"\n', r"unknown key `apikey` under \[groq\]"),
        ("[groq]\ntimeout = true\n", r"`timeout` under \[groq\] in .* must be a number"),
        ('groq = "gsk_x"\n', "must be a table"),
    ],
)
def test_bad_config_file(tmp_path: Path, content: str, problem: str) -> None:
    (tmp_path / "config.toml").write_text(content)
    with pytest.raises(ConfigError, match=problem) as caught:
        resolve_settings("groq", env={"GBR_HOME": str(tmp_path), "GROQ_API_KEY": KEY})
    assert "gsk_x" not in str(caught.value)


def test_registry_end_to_end(fake_llm: FakeLlm) -> None:
    for name in ("groq", "gemini", "openai"):
        provider = get_provider(name, env=fake_llm.env(name))
        assert provider.complete(MESSAGES) == fake_llm.default_answer
    assert [r.path.split(":")[0] for r in fake_llm.requests] == [
        "/openai/v1/chat/completions",
        "/v1beta/models/gemini-2.0-flash",
        "/v1/chat/completions",
    ]


def test_register_a_provider() -> None:
    class EchoProvider(OpenAICompatProvider):
        key_env = "ECHO_KEY"
        base_url_env = "ECHO_URL"

    registry = ProviderRegistry()
    registry.register("echo", EchoProvider, aliases=["parrot"])
    assert registry.available() == ["echo"]
    provider = registry.get_provider(
        "parrot", env={"ECHO_URL": "http://127.0.0.1:9/v1", "ECHO_KEY": KEY}
    )
    assert isinstance(provider, EchoProvider)
    assert provider.settings.api_key == KEY  # type: ignore[attr-defined]


# -- the fake server itself, as the Oracle's tests will use it -----------------------------------


def test_fake_respond_function_and_whole_replies(fake_llm: FakeLlm) -> None:
    fake_llm.respond = lambda body: "echo: " + str(len(body.get("messages", body.get("contents"))))
    with httpx.Client(base_url=fake_llm.url) as client:
        whole = client.post("/v1/chat/completions", json={"model": "m", "messages": [{}, {}]})
        assert whole.json()["choices"][0]["message"]["content"] == "echo: 2"
        gemini = client.post("/v1beta/models/g:generateContent", json={"contents": [{}]})
        assert gemini.json()["candidates"][0]["content"]["parts"][0]["text"] == "echo: 1"
        assert client.post("/nowhere", json={}).status_code == 404
    assert fake_llm.requests[1].model == "g"


# -- SSE parser ----------------------------------------------------------------------------------


def test_sse_basic_events_comments_and_done() -> None:
    stream = ': keep-alive\n\ndata: {"a": 1}\n\ndata:no-space\n\ndata: [DONE]\n\n'
    events = list(iter_sse([stream]))
    assert [e.data for e in events] == ['{"a": 1}', "no-space", "[DONE]"]
    assert [e.is_done for e in events] == [False, False, True]


def test_sse_multiline_data_event_and_id() -> None:
    stream = "event: delta\nid: 7\ndata: line one\ndata:  two spaces\ndata\n\ndata: next\n\n"
    first, second = iter_sse([stream])
    assert first == SseEvent(data="line one\n two spaces\n", event="delta", id="7")
    assert second == SseEvent(data="next", event="message", id="7")  # the id persists


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_sse_line_endings(newline: str) -> None:
    stream = f"data: a{newline}data: b{newline}{newline}data: c{newline}{newline}"
    assert [e.data for e in iter_sse([stream])] == ["a\nb", "c"]


def test_sse_any_split_gives_the_same_events() -> None:
    stream = '\ufeffdata: {"x": "é"}\r\n\r\n: c\r\ndata: y\r\n\r\n'
    whole = list(iter_sse([stream]))
    assert [e.data for e in whole] == ['{"x": "é"}', "y"]
    assert list(iter_sse(stream)) == whole  # one character at a time: CR and LF apart
    for cut in range(len(stream)):
        assert list(iter_sse([stream[:cut], stream[cut:]])) == whole


def test_sse_unterminated_or_empty_events_are_not_dispatched() -> None:
    parser = SseParser()
    assert parser.feed("event: ping\n\n\n\ndata: half") == []
    assert parser.feed("") == []
    assert list(iter_sse(["data: cut mid-ev"])) == []


# -- retry pacing ----------------------------------------------------------------------------------


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    low = Backoff(initial=0.5, maximum=4.0, rng=lambda: 0.0)
    high = Backoff(initial=0.5, maximum=4.0, rng=lambda: 0.999999)
    assert [low.delay(n) for n in range(1, 6)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert [round(high.delay(n), 3) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert low.delay(3, retry_after="9") == 9.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-4", 0.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, now=1_445_412_480.0) == seconds


def test_retryable_statuses() -> None:
    assert [
        s for s in (400, 401, 404, 408, 429, 500, 501, 502, 503, 505, 529) if is_retryable(s)
    ] == [
        429,
        500,
        502,
        503,
        529,
    ]


def test_safe_url_drops_secrets() -> None:
    assert safe_url("https://user:pw@127.0.0.1:8443/v1?key=abc#x") == "https://127.0.0.1:8443/v1"
    assert safe_url("http://[::1]:80/v1") == "http://[::1]:80/v1"
    assert safe_url("http://127.0.0.1:port/v1") == "(an unparseable URL)"


# -- transport failures a local server cannot stage (httpx.MockTransport) -------------------------


def _openai_over(
    handler: Callable[[httpx.Request], httpx.Response], fake_time: FakeTime
) -> HttpProvider:
    settings = ProviderSettings("openai", "http://127.0.0.1:9/v1", "m", max_retries=2)
    return OpenAICompatProvider(
        settings, backoff=fake_time.backoff(), transport=httpx.MockTransport(handler)
    )


def test_connect_timeouts_are_retried_then_reported(fake_time: FakeTime) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    with pytest.raises(
        ProviderTimeoutError, match=r"^could not connect to openai at http://127\.0\.0\.1:9/v1"
    ):
        _openai_over(handler, fake_time).complete(MESSAGES)
    assert len(fake_time.sleeps) == 2


def test_a_dropped_connection_before_the_reply_is_retried(fake_time: FakeTime) -> None:
    calls: list[int] = []
    done = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:  # a stale keep-alive connection the server had closed
            raise httpx.RemoteProtocolError("Server disconnected", request=request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=done)

    assert _openai_over(handler, fake_time).complete(MESSAGES) == "hi"
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"choices": [{"message": {"content": "hi"}}]}', "one JSON body instead of an event"),
        (b'{"error": {"message": "upstream down"}}', "reported an error: upstream down"),
        (b"<html>", "not valid JSON"),
    ],
)
def test_a_json_reply_where_a_stream_was_asked(
    fake_time: FakeTime, body: bytes, problem: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    with pytest.raises(ProviderResponseError, match=problem):
        _openai_over(handler, fake_time).complete(MESSAGES)


@pytest.mark.parametrize("base_url", ["localhost:11434/v1", "ftp://127.0.0.1/v1", "http://[::1/v1"])
def test_a_bad_base_url_is_a_config_error(fake_time: FakeTime, base_url: str) -> None:
    settings = ProviderSettings("openai", base_url, "m")
    problem = r"is not a valid http\(s\) URL; fix GBR_OPENAI_BASE_URL"
    with (
        OpenAICompatProvider(settings, backoff=fake_time.backoff()) as provider,
        pytest.raises(ConfigError, match=problem),
    ):
        provider.complete(MESSAGES)
    assert fake_time.sleeps == []
