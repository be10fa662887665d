"""LLM providers for `gleambrctl ask`: Groq, Gemini and any OpenAI-compatible server.

provider = get_provider(env=os.environ)  # the first configured: groq, gemini, then openai
for delta in provider.stream([Message("system", RULES), Message("user", question)]):
    print(delta, end="", flush=True)

Each name is imported on first use (PEP 562): the prompt and the code graph need only
`Message`, and a cold `search` must not load every provider (and httpx's retry logic)
behind it. This room sits below ranking because the optional LLM reranker uses a provider
too; it may import only the ground floor of `gbr.core` (errors, telemetry, lazy, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gbr.core.lazy import lazy_names

if TYPE_CHECKING:
    from gbr.core.llm.base import LlmProvider, Message, ProviderSettings
    from gbr.core.llm.registry import (
        available,
        get_provider,
        is_configured,
        provider_env_vars,
        register,
    )

_HOMES = {
    "LlmProvider": "gbr.core.llm.base",
    "Message": "gbr.core.llm.base",
    "ProviderSettings": "gbr.core.llm.base",
    "available": "gbr.core.llm.registry",
    "get_provider": "gbr.core.llm.registry",
    "is_configured": "gbr.core.llm.registry",
    "provider_env_vars": "gbr.core.llm.registry",
    "register": "gbr.core.llm.registry",
}

__all__ = [
    "LlmProvider",
    "Message",
    "ProviderSettings",
    "available",
    "get_provider",
    "is_configured",
    "provider_env_vars",
    "register",
]


__getattr__ = lazy_names(__name__, _HOMES)
