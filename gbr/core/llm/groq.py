"""Groq: the OpenAI chat-completions format on Groq's hosted models."""

from __future__ import annotations

from gbr.core.environ import GROQ_BASE_URL, GROQ_MODEL
from gbr.core.llm.openai_compat import OpenAICompatProvider


class GroqProvider(OpenAICompatProvider):
    key_env = "GROQ_API_KEY"
    base_url_env = GROQ_BASE_URL.name
    model_env = GROQ_MODEL.name
    default_base_url = "https://api.groq.com/openai/v1"
    default_model = "llama-3.3-70b-versatile"
    key_required = True
    # Groq documents `max_completion_tokens` and marks `max_tokens` deprecated.
    max_tokens_field = "max_completion_tokens"
