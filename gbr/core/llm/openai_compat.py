"""Any server that speaks OpenAI chat completions: Ollama, llama.cpp, vLLM, OpenAI itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from gbr.core.environ import OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL
from gbr.core.llm.base import Message
from gbr.core.llm.http_provider import Delta, HttpProvider


class OpenAICompatProvider(HttpProvider):
    """`POST {base_url}/chat/completions` with `stream: true`.

    The answer is complete at `data: [DONE]`, or at a chunk with a `finish_reason` (some
    llama.cpp builds close the stream without `[DONE]`); a stream ending before either was cut.
    """

    key_env = OPENAI_API_KEY.name
    base_url_env = OPENAI_BASE_URL.name
    model_env = OPENAI_MODEL.name
    default_base_url = "http://127.0.0.1:11434/v1"  # Ollama
    default_model = "llama3.2"  # Ollama's default pull; llama.cpp ignores the name
    key_required = False  # local servers need none
    wire_format = "OpenAI chat-completions"
    description = "a local OpenAI-compatible server"
    max_tokens_field: ClassVar[str] = "max_tokens"
    """`max_tokens`, not OpenAI's newer `max_completion_tokens`, for an unknown local server:
    Ollama's compatible API silently ignores the newer name (ollama/ollama#7125, open), so the
    answer would run unbounded, and every llama.cpp and vLLM build reads `max_tokens`, while
    older ones may not know the newer name. A provider known to read it sets it here (Groq)."""

    def _url(self) -> str:
        return self.settings.base_url.rstrip("/") + "/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self.settings.api_key:
            headers["authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    def _body(
        self, messages: Sequence[Message], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": True,
            self.max_tokens_field: max_tokens,
            "temperature": temperature,
        }

    def _read_event(self, data: str) -> Delta:
        payload = self._json(data)
        choices = payload.get("choices")
        if not isinstance(choices, list):
            raise self._unexpected("a chunk without a `choices` list")
        if not choices:  # OpenAI's usage-only chunk (`stream_options.include_usage`)
            return Delta("")
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise self._unexpected("a choice without a `delta` object")
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise self._unexpected("a `content` that is not text")
        reason = choice.get("finish_reason")
        if reason == "content_filter":  # the server's filter withheld (the rest of) the answer
            return Delta(content or "", refused="finish_reason content_filter")
        return Delta(content or "", finished=bool(reason))
