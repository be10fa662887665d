"""LLM providers for `gleambrctl ask`: Groq, Gemini and any OpenAI-compatible server.

provider = get_provider(env=os.environ)  # the first configured: groq, gemini, then openai
for delta in provider.stream([Message("system", RULES), Message("user", question)]):
    print(delta, end="", flush=True)
"""

from gbr.core.llm.base import LlmProvider, Message, ProviderSettings
from gbr.core.llm.registry import (
    available,
    get_provider,
    is_configured,
    provider_env_vars,
    register,
)

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
