"""Gemini: Google's generateContent API, streamed as server-sent events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from gbr.core.errors import ProviderResponseError
from gbr.core.llm.base import Message
from gbr.core.llm.http_provider import Delta, HttpProvider


class GeminiProvider(HttpProvider):
    """`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`.

    The key goes in the `x-goog-api-key` header rather than `?key=`, so it never lands in a URL
    that a proxy, a log line or an error message could show. Gemini has no `[DONE]`: the answer
    is complete at the chunk that carries a `finishReason`.
    """

    key_env = "GEMINI_API_KEY"
    base_url_env = "GBR_GEMINI_BASE_URL"
    model_env = "GBR_GEMINI_MODEL"
    default_base_url = "https://generativelanguage.googleapis.com"
    default_model = "gemini-2.0-flash"
    key_required = True
    wire_format = "Gemini generateContent"

    def _url(self) -> str:
        model = quote(self.model.removeprefix("models/"), safe="")
        base = self.settings.base_url.rstrip("/")
        return f"{base}/v1beta/models/{model}:streamGenerateContent?alt=sse"

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self.settings.api_key:
            headers["x-goog-api-key"] = self.settings.api_key
        return headers

    def _body(
        self, messages: Sequence[Message], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        # Gemini keeps the system prompt apart from the turns, and calls the assistant "model".
        system = [{"text": m.content} for m in messages if m.role == "system"]
        contents = [
            {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
            for m in messages
            if m.role != "system"
        ]
        if not contents:
            raise ValueError("Gemini needs at least one user or assistant message")
        body: dict[str, Any] = {
            "contents": contents,
            "generationConfig": {"temperature": temperature, "maxOutputTokens": max_tokens},
        }
        if system:
            body["systemInstruction"] = {"parts": system}
        return body

    def _read_event(self, data: str) -> Delta:
        payload = self._json(data)
        candidates = payload.get("candidates")
        if candidates is None:
            blocked = (payload.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                raise self._error(
                    ProviderResponseError,
                    f"{self.name} refused the question ({blocked}); rephrase it and ask again",
                )
            return Delta("")  # a usage-only chunk
        if not isinstance(candidates, list):
            raise self._unexpected("`candidates` is not a list")
        if not candidates:
            return Delta("")
        candidate = candidates[0]
        if not isinstance(candidate, dict):
            raise self._unexpected("a candidate that is not an object")
        content = candidate.get("content") or {}
        if not isinstance(content, dict):
            raise self._unexpected("a candidate `content` that is not an object")
        parts = content.get("parts") or []
        if not isinstance(parts, list):
            raise self._unexpected("`content.parts` is not a list")
        # Thinking models stream their reasoning as parts marked `thought`: not the answer.
        text = "".join(
            part["text"]
            for part in parts
            if isinstance(part, dict)
            and isinstance(part.get("text"), str)
            and not part.get("thought")
        )
        return Delta(text, finished=bool(candidate.get("finishReason")))
