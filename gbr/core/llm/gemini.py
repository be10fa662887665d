"""Gemini: Google's generateContent API, streamed as server-sent events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from gbr.core.environ import GEMINI_BASE_URL, GEMINI_MODEL
from gbr.core.llm.base import Message
from gbr.core.llm.http_provider import Delta, HttpProvider

# Finish reasons that mean "declined", not "done": the answer is missing or cut, and saying
# nothing would pass an empty or partial reply off as the whole answer. MAX_TOKENS, STOP and
# the rest end an answer normally.
REFUSALS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)


class GeminiProvider(HttpProvider):
    """`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`.

    The key goes in the `x-goog-api-key` header rather than `?key=`, so it never lands in a URL
    that a proxy, a log line or an error message could show. Gemini has no `[DONE]`: the answer
    is complete at the chunk that carries a `finishReason`. A model is `models/NAME` or, for a
    tuned model, `tunedModels/NAME`; a bare name means `models/NAME`.
    """

    key_env = "GEMINI_API_KEY"
    base_url_env = GEMINI_BASE_URL.name
    model_env = GEMINI_MODEL.name
    default_base_url = "https://generativelanguage.googleapis.com"
    default_model = "gemini-2.0-flash"
    key_required = True
    wire_format = "Gemini generateContent"

    def _url(self) -> str:
        collection, slash, name = self.model.partition("/")
        if not slash or collection not in ("models", "tunedModels"):
            collection, name = "models", self.model
        # The collection's slash is part of the path; one inside the name would not be.
        base = self.settings.base_url.rstrip("/")
        return f"{base}/v1beta/{collection}/{quote(name, safe='')}:streamGenerateContent?alt=sse"

    def _key_rejection(self, status: int, body: Any) -> str | None:
        # A bad key is a 400 INVALID_ARGUMENT whose details say API_KEY_INVALID, not a 401.
        if status == 400 and "API_KEY_INVALID" in _error_reasons(body):
            return f"{status} API_KEY_INVALID"
        return super()._key_rejection(status, body)

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
        feedback = payload.get("promptFeedback")
        blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if blocked:  # the question itself was blocked: no candidates at all
            return Delta("", refused=f"the question was blocked: {blocked}")
        candidates = payload.get("candidates")
        if candidates is None:
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
        reason = candidate.get("finishReason")
        if reason in REFUSALS:  # its text, if any, is shown before the refusal is raised
            return Delta(text, refused=f"finishReason {reason}")
        return Delta(text, finished=bool(reason))


def _error_reasons(body: Any) -> set[str]:
    """The `reason` of each `google.rpc.ErrorInfo` in a Google error body's `details`."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return set()
    return {
        d["reason"] for d in details if isinstance(d, dict) and isinstance(d.get("reason"), str)
    }
