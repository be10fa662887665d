"""Each provider against what the real services send: metadata around the text, usage chunks,
refusals, and the bad-key replies, all spoken by the fake server on 127.0.0.1.

The shapes follow the services' documented wire formats (the ones the official SDKs read):
OpenAI and Groq chat completions, Gemini generateContent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from gbr.core.errors import ProviderAuthError, ProviderError, ProviderResponseError
from gbr.core.llm import Message, ProviderSettings
from gbr.core.llm.gemini import GeminiProvider
from gbr.core.llm.groq import GroqProvider
from gbr.core.llm.http_provider import HttpProvider
from gbr.core.llm.openai_compat import OpenAICompatProvider
from tests.fake_llm import FakeLlm, Reply

KEY = "test-KEY-0123456789abcdef"
MESSAGES = [Message("system", "Answer from the code."), Message("user", "How do I map a list?")]
PROVIDERS: dict[str, type[HttpProvider]] = {
    "openai": OpenAICompatProvider,
    "groq": GroqProvider,
    "gemini": GeminiProvider,
}
BASE_URL = {
    "openai": lambda f: f.openai_base_url,
    "groq": lambda f: f.groq_base_url,
    "gemini": lambda f: f.gemini_base_url,
}


@pytest.fixture(params=list(PROVIDERS))
def name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make(fake_llm: FakeLlm, name: str) -> Iterator[Callable[..., HttpProvider]]:
    made: list[HttpProvider] = []

    def build(**overrides: object) -> HttpProvider:
        settings = ProviderSettings(
            **{  # type: ignore[arg-type]
                "name": name,
                "base_url": BASE_URL[name](fake_llm),
                "model": PROVIDERS[name].default_model,
                "timeout": 10.0,
                "deadline": 20.0,
                "api_key": KEY,
                **overrides,
            }
        )
        provider = PROVIDERS[name](settings)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()


def drain(stream: Iterator[str]) -> tuple[list[str], BaseException | None]:
    seen: list[str] = []
    try:
        seen.extend(stream)
    except ProviderError as exc:
        return seen, exc
    return seen, None


def sse_payloads(response: httpx.Response) -> list[str]:
    return [
        line.removeprefix("data: ")
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


# -- the shapes, as the fake sends them ------------------------------------------------------------


def test_openai_shapes_whole_and_streamed(fake_llm: FakeLlm) -> None:
    body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=fake_llm.url) as client:
        whole = client.post("/v1/chat/completions", json=body).json()
        assert {"id", "object", "created", "model", "usage", "system_fingerprint"} <= set(whole)
        assert whole["object"] == "chat.completion" and whole["model"] == "gpt-x"
        assert isinstance(whole["created"], int) and whole["created"] > 1_700_000_000
        assert whole["usage"]["total_tokens"] == (
            whole["usage"]["prompt_tokens"] + whole["usage"]["completion_tokens"]
        )
        assert whole["choices"][0]["message"]["refusal"] is None
        plain = sse_payloads(client.post("/v1/chat/completions", json={**body, "stream": True}))
        asked = {**body, "stream": True, "stream_options": {"include_usage": True}}
        counted = sse_payloads(client.post("/v1/chat/completions", json=asked))
    assert plain[-1] == counted[-1] == "[DONE]"
    assert all(json.loads(p)["choices"] for p in plain[:-1])  # no usage chunk unless asked
    *chunks, usage, _ = [json.loads(p) for p in counted[:-1]] + [None]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    assert all(c["usage"] is None and c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_groq_shapes_whole_and_streamed(fake_llm: FakeLlm) -> None:
    body = {"model": "llama", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=fake_llm.url) as client:
        whole = client.post("/openai/v1/chat/completions", json=body).json()
        stream = sse_payloads(
            client.post("/openai/v1/chat/completions", json={**body, "stream": True})
        )
    assert whole["x_groq"]["id"].startswith("req_")
    assert {"queue_time", "total_time", "prompt_tokens", "completion_tokens"} <= set(whole["usage"])
    first, *_, last = [json.loads(p) for p in stream[:-1]]
    assert stream[-1] == "[DONE]"
    assert first["x_groq"]["id"].startswith("req_") and "usage" not in first["x_groq"]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["x_groq"]["usage"]["completion_tokens"] > 0


def test_gemini_shapes_whole_and_streamed(fake_llm: FakeLlm) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.Client(base_url=fake_llm.url) as client:
        whole = client.post("/v1beta/models/gemini-x:generateContent", json=body).json()
        stream = client.post("/v1beta/models/gemini-x:streamGenerateContent?alt=sse", json=body)
    assert "\r\n\r\n" in stream.text  # Gemini ends its lines in CRLF
    for reply in [whole, *map(json.loads, sse_payloads(stream))]:
        assert reply["modelVersion"] == "gemini-x"
        assert reply["responseId"]
        assert reply["usageMetadata"]["promptTokenCount"] > 0
    assert whole["candidates"][0]["finishReason"] == "STOP"
    assert "[DONE]" not in stream.text


@pytest.mark.parametrize("refusal", ["safety", "prompt"])
def test_gemini_refusal_shapes(fake_llm: FakeLlm, refusal: str) -> None:
    fake_llm.script(Reply(refusal=refusal), Reply(refusal=refusal))  # type: ignore[arg-type]
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.Client(base_url=fake_llm.url) as client:
        whole = client.post("/v1beta/models/g:generateContent", json=body).json()
        streamed = client.post("/v1beta/models/g:streamGenerateContent?alt=sse", json=body)
    (chunk,) = map(json.loads, sse_payloads(streamed))
    for reply in (whole, chunk):
        assert "usageMetadata" in reply
        if refusal == "safety":
            (candidate,) = reply["candidates"]
            assert candidate["finishReason"] == "SAFETY" and "content" not in candidate
            assert any(r.get("blocked") for r in candidate["safetyRatings"])
        else:
            assert "candidates" not in reply
            assert reply["promptFeedback"]["blockReason"] == "SAFETY"


def test_bad_key_replies_are_each_services_own(fake_llm: FakeLlm) -> None:
    fake_llm.keys = {KEY}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=fake_llm.url) as client:
        gemini = client.post(
            "/v1beta/models/g:generateContent", json={}, headers={"x-goog-api-key": "nope"}
        )
        groq = client.post(
            "/openai/v1/chat/completions", json=chat, headers={"authorization": "Bearer nope"}
        )
        good = client.post(
            "/v1/chat/completions", json=chat, headers={"authorization": f"Bearer {KEY}"}
        )
    assert gemini.status_code == 400
    error = gemini.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"] == "API key not valid. Please pass a valid API key."
    assert error["details"][0] == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }
    assert groq.status_code == 401 and groq.json()["error"]["code"] == "invalid_api_key"
    assert good.status_code == 200


# -- each provider against them, streaming and whole -----------------------------------------------


@pytest.mark.parametrize("usage_chunk", [False, True])
def test_every_provider_reads_past_the_metadata(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], usage_chunk: bool
) -> None:
    pieces = ["Use ", "`list.map`", " from gleam/list."]
    fake_llm.script(Reply(chunks=pieces, usage_chunk=usage_chunk), Reply("".join(pieces)))
    provider = make()
    assert list(provider.stream(MESSAGES)) == pieces
    assert provider.complete(MESSAGES) == "".join(pieces)


def test_a_usage_chunk_alone_ends_nothing(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], name: str
) -> None:
    # The usage-only chunk is neither text nor the end: a stream cut right after it is cut.
    if name == "gemini":
        usage = '{"usageMetadata": {"promptTokenCount": 3}, "responseId": "r"}'
    else:
        usage = '{"id": "c", "choices": [], "usage": {"total_tokens": 3}}'
    fake_llm.script(Reply(raw_events=[usage]))
    seen, error = drain(make().stream(MESSAGES))
    assert seen == []
    assert isinstance(error, ProviderResponseError)
    assert "before the answer was complete" in str(error)


@pytest.mark.parametrize("refusal", ["safety", "prompt"])
def test_a_refusal_is_an_error_not_an_empty_answer(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], name: str, refusal: str
) -> None:
    fake_llm.script(Reply(refusal=refusal), Reply(refusal=refusal))  # type: ignore[arg-type]
    provider = make()
    seen, error = drain(provider.stream(MESSAGES))
    assert seen == []
    assert isinstance(error, ProviderResponseError)
    reason = {
        ("gemini", "safety"): "finishReason SAFETY",
        ("gemini", "prompt"): "the question was blocked: SAFETY",
    }.get((name, refusal), "finish_reason content_filter")
    assert str(error) == (
        f"{name} refused to answer ({reason}); rephrase the question and ask again"
    )
    assert error.exit_code == 4
    with pytest.raises(ProviderResponseError, match="refused to answer"):
        provider.complete(MESSAGES)
    assert len(fake_llm.requests) == 2  # a refusal is an answer: never retried


def test_a_refusal_midway_keeps_the_text_and_says_it_is_partial(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], name: str
) -> None:
    fake_llm.script(Reply(chunks=["Here is ", "how"], refusal="safety"))
    seen, error = drain(make().stream(MESSAGES))
    assert seen == ["Here is ", "how"]
    assert isinstance(error, ProviderResponseError)
    assert str(error).startswith(f"{name} stopped its answer midway (")
    assert "the text so far is partial" in str(error)


def test_a_bad_key_is_a_key_error_for_every_provider(
    fake_llm: FakeLlm, make: Callable[..., HttpProvider], name: str
) -> None:
    fake_llm.keys = {"the-one-good-key-000"}
    with pytest.raises(ProviderAuthError) as caught:
        make().complete(MESSAGES)
    status = "400 API_KEY_INVALID" if name == "gemini" else "401"
    var = PROVIDERS[name].key_env
    assert str(caught.value) == (
        f"{name} rejected the API key ({status}); set a valid one in {var} "
        f"(or api_key under [{name}] in the gbr config.toml)"
    )
    assert caught.value.exit_code == ProviderAuthError("x").exit_code
    assert len(fake_llm.requests) == 1  # not retried
    assert fake_llm.requests[0].api_key == KEY


def test_gemini_400_without_the_key_reason_is_still_a_bad_request(fake_llm: FakeLlm) -> None:
    body = json.dumps(
        {
            "error": {
                "code": 400,
                "message": "The input token count exceeds the maximum.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest"}],
            }
        }
    )
    fake_llm.script(Reply.error(400, body=body))
    settings = ProviderSettings("gemini", fake_llm.url, "gemini-2.0-flash", api_key=KEY)
    with GeminiProvider(settings) as provider, pytest.raises(ProviderResponseError) as caught:
        provider.complete(MESSAGES)
    assert not isinstance(caught.value, ProviderAuthError)
    assert "refused the request (HTTP 400: The input token count exceeds" in str(caught.value)


# -- Gemini model names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("tunedModels/my-model", "/v1beta/tunedModels/my-model:streamGenerateContent"),
        ("models/gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
        ("gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
        ("odd/name", "/v1beta/models/odd%2Fname:streamGenerateContent"),
    ],
)
def test_gemini_model_paths(fake_llm: FakeLlm, model: str, path: str) -> None:
    settings = ProviderSettings("gemini", fake_llm.url, model, api_key=KEY)
    with GeminiProvider(settings) as provider:
        assert provider.complete(MESSAGES) == fake_llm.default_answer
    (request,) = fake_llm.requests
    assert request.path == path  # as sent on the wire, before any decoding
