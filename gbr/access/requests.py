"""One request type per operation, held to one set of limits whichever door it came in by.

The CLI, the HTTP API, the MCP tools and a chat each parse their own syntax, but the
bounds they check are the ones below, and the engine checks them again on the request it
runs (`SearchRequest.check`, `AskRequest.check`), so a query or a `k` refused by one door
is refused by all, with the same one-line error. Before, the MCP tools took 2,000-character
queries and 50 hits where the CLI and HTTP took 10,000 and 200.

Importing this module loads no pydantic and no model: a cold `search` reads it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gbr.core.errors import ConfigError
from gbr.core.records import MODES, NO_FILTER, Mode, SearchFilter

if TYPE_CHECKING:
    from gbr.core.answer.oracle import AskOptions
    from gbr.core.llm import Message

MAX_QUERY_CHARS = 10_000  # a search query or a question
MAX_SEARCH_K = 200  # hits one search returns
MAX_ASK_K = 50  # chunks one answer may send the LLM
MIN_BUDGET = 200  # an answer's context budget, in estimated tokens
MAX_BUDGET = 200_000
MAX_FILTER_CHARS = 4096  # a path or module filter
MAX_KINDS = 16  # kinds in one filter (there are six; repeats are harmless)
MAX_PROVIDER_CHARS = 100
MAX_MODEL_CHARS = 200


@dataclass(frozen=True, slots=True)
class LlmChoice:
    """Which provider, model and reranker answer; None means the configured default."""

    provider: str | None = None
    model: str | None = None
    timeout: float | None = None  # seconds per LLM request; a daemon keeps its own
    reranker: str | None = None  # what `--rerank` uses (see `ask_reranker_spec`)


def _check_text(text: str, what: str, empty: str) -> None:
    if not (text.strip() if what == "question" else text):
        raise ConfigError(f"the {what} is empty; {empty}")
    if len(text) > MAX_QUERY_CHARS:
        raise ConfigError(
            f"the {what} is {len(text)} characters long, over the {MAX_QUERY_CHARS} a "
            f"{'search' if what == 'query' else 'question'} takes; shorten it"
        )


def _check_range(value: int, low: int, high: int, what: str) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{what} must be from {low} to {high}, not {value}")


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A search, as every door hands it to the engine."""

    query: str
    k: int = 10
    mode: Mode = "hybrid"
    where: SearchFilter = NO_FILTER

    def check(self) -> SearchRequest:
        """This request, or a ConfigError saying which limit it passes."""
        _check_text(self.query, "query", "search for words or an identifier")
        _check_range(self.k, 1, MAX_SEARCH_K, "k (hits to return)")
        if self.mode not in MODES:
            raise ConfigError(f"unknown search mode {self.mode!r}; use one of {', '.join(MODES)}")
        for name in ("path", "module"):
            value = getattr(self.where, name)
            if value is not None and len(value) > MAX_FILTER_CHARS:
                raise ConfigError(
                    f"the {name} filter is over {MAX_FILTER_CHARS} characters; shorten it"
                )
        if len(self.where.kinds) > MAX_KINDS:
            raise ConfigError(f"at most {MAX_KINDS} kinds in one search")
        return self


@dataclass(frozen=True)
class AskRequest:
    """A question, as every door hands it to the engine: what to answer, how, and by whom."""

    question: str
    options: AskOptions
    llm: LlmChoice = field(default_factory=LlmChoice)
    history: Sequence[Message] = ()  # earlier turns of a chat, oldest first

    def check(self) -> AskRequest:
        """This request, or a ConfigError saying which limit it passes."""
        _check_text(self.question, "question", "ask something about the code")
        _check_range(self.options.max_chunks, 1, MAX_ASK_K, "k (chunks to send)")
        _check_range(self.options.budget, MIN_BUDGET, MAX_BUDGET, "the budget (tokens)")
        if len(self.llm.provider or "") > MAX_PROVIDER_CHARS:
            raise ConfigError(f"the provider name is over {MAX_PROVIDER_CHARS} characters")
        if len(self.llm.model or "") > MAX_MODEL_CHARS:
            raise ConfigError(f"the model name is over {MAX_MODEL_CHARS} characters")
        return self

    def parts(self) -> tuple[str, AskOptions, LlmChoice, Sequence[Message]]:
        return self.question, self.options, self.llm, self.history
