"""What every LLM provider offers: chat messages in, text deltas out.

`gleambrctl ask` and HyDE only need `stream` and `complete` (and `close` when done), so a
provider is anything with those methods (a `Protocol`, not a base class); `HttpProvider` is
the shared implementation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class ProviderSettings:
    """Resolved settings of one provider; the key is kept out of `repr` so it never gets printed."""

    name: str
    base_url: str
    model: str
    timeout: float = 30.0
    """Seconds one request may wait on connect, or between two received bytes."""
    deadline: float = 60.0
    """Seconds from the first attempt until the first token, retries and their waits included."""
    max_retries: int = 4
    api_key: str | None = field(default=None, repr=False)


class LlmProvider(Protocol):
    name: str
    model: str

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.2,
        until: float | None = None,
    ) -> Iterator[str]:
        """Yield the answer's text deltas as they arrive; past `until` (time.monotonic),
        stop with AnswerLimitError, however the server trickles."""
        ...

    def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> str:
        """The whole answer at once."""
        ...

    def close(self) -> None:
        """Let go of the provider's connections; it is not used afterwards."""
        ...
