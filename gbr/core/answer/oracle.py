"""The Oracle's logic: retrieve (with HyDE), rerank, assemble the context, ask, check citations.

No actors here: `gbr.actors.oracle` wraps this for the supervisor tree, and tests call it
directly. Whatever fails on the LLM side, the retrieved context is still returned, so the
user is never left with nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gbr.core.answer.context import (
    Outline,
    Span,
    context_tokens,
    render_with_outlines,
    used_outlines,
)
from gbr.core.answer.limits import (
    DEFAULT_DEADLINE,
    DEFAULT_MAX_ANSWER,
    cap_message,
    deadline_message,
)
from gbr.core.answer.prompt import (
    HYDE_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    Citation,
    ContextChunk,
    Source,
    check_citations,
    condense_messages,
    edges_first,
    fit_history,
    followup_query,
    leans_on_history,
    message_tokens,
    select,
    sources,
    user_prompt,
)
from gbr.core.errors import AnswerLimitError, MissingKeyError, ProviderError
from gbr.core.graph.model import Definition
from gbr.core.graph.store import GraphReader
from gbr.core.llm.base import LlmProvider, Message
from gbr.core.rank.priors import DEFAULT_TEST_POLICY, TestPolicy
from gbr.core.rank.rerank import Reranker
from gbr.core.rank.search import Filter, Searcher, looks_like_code, rrf
from gbr.core.records import Hit
from gbr.core.telemetry import log

TokenSink = Callable[[str], None]
# Hears the answer once its chunks and prompt are set, before the LLM streams.
ContextSink = Callable[["Answer"], None]


@dataclass(frozen=True, slots=True)
class AskOptions:
    max_chunks: int = 8
    budget: int = 3000  # estimated tokens of context
    candidates: int = 30  # fetched for the reranker to reorder
    rerank: bool = False
    # None: on for open questions when a provider is configured. False also turns off the
    # follow-up rewrite: no LLM call is made before the answer.
    hyde: bool | None = None
    hyde_timeout: float = 2.0
    # How many of the plain question's best hits stay first whatever HyDE's guess brings;
    # None: half of max_chunks, at least one (bench/hyde_context.py, issue 30).
    hyde_keeps: int | None = None
    dry_run: bool = False
    max_answer_tokens: int = 1024
    history_share: float = 0.5  # of the budget, at most, for earlier turns of a conversation
    tests: TestPolicy = DEFAULT_TEST_POLICY  # test and example code: include, demote, exclude
    # Outlines of what the chosen chunks call or use, in the budget they leave (graph/context).
    graph_context: bool = True
    deadline: float = DEFAULT_DEADLINE  # seconds for the whole answer (gbr.core.answer.limits)
    max_answer_bytes: int = DEFAULT_MAX_ANSWER  # of answer text; the stream is stopped past it


@dataclass
class Notes:
    """What retrieval learns on the way, for the answer: timings, HyDE's fate, the reranker
    used, a follow-up's retrieval text. Only the Oracle's own thread writes it."""

    timings: dict[str, float] = field(default_factory=dict)
    reranker: str | None = None
    hyde: str = "off"  # off | used | timed_out | failed
    retrieval_query: str | None = None


@dataclass(frozen=True)
class Answer:
    """An answer as it leaves the Oracle; a changed copy is made with `dataclasses.replace`."""

    question: str
    text: str = ""
    chunks: list[ContextChunk] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    provider: str | None = None
    model: str | None = None
    reranker: str | None = None
    hyde: str = "off"  # off | used | timed_out | failed
    error: str | None = None
    history_sent: int = 0  # earlier messages (user and assistant) sent with the question
    history_trimmed: int = 0  # earlier messages left out to keep within the budget
    cancelled: bool = False  # the caller stopped the stream; `text` is what came before
    retrieval_query: str | None = None  # a follow-up's retrieval text (its turn, or a rewrite)
    outlines: list[Outline] = field(default_factory=list)  # from the code graph, after chunks

    def chunks_as_dicts(self) -> list[dict[str, Any]]:
        """The context sent, as `ask --json` lists it (and the daemon's `context` event)."""
        return [{**c.hit.as_dict(), "text": c.text, "truncated": c.truncated} for c in self.chunks]

    def sources(self) -> list[Source]:
        return sources(self.text, self.chunks, self.citations)

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "error": self.error,
            "cancelled": self.cancelled,
            "provider": self.provider,
            "model": self.model,
            "reranker": self.reranker,
            "hyde": self.hyde,
            "retrieval_query": self.retrieval_query,
            "citations": [c.as_dict() for c in self.citations],
            "unknown_citations": [c.as_dict() for c in self.citations if not c.known],
            "chunks": self.chunks_as_dicts(),
            "graph_context": [o.as_dict() for o in self.outlines],
            "sources": [
                {
                    "rank": s.hit.rank,
                    "path": s.hit.path,
                    "name": s.hit.name,
                    "start_line": s.hit.start_line,
                    "end_line": s.hit.end_line,
                    "cited": s.cited,
                }
                for s in self.sources()
            ],
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Answer:
        """The answer back from `as_dict` (as the daemon's /ask sends it).

        A chunk's `text` is what went into the prompt, so a cut chunk comes back cut. The
        messages come back only from a dry run (its `prompt`); `history_sent` and
        `history_trimmed` only when the daemon was sent a history.
        """
        return cls(
            question=data["question"],
            text=data.get("answer") or "",
            chunks=[
                ContextChunk(Hit.from_dict(c), c["text"], bool(c.get("truncated")))
                for c in data.get("chunks", [])
            ],
            messages=[Message(m["role"], m["content"]) for m in data.get("prompt", [])],
            citations=[Citation.from_dict(c) for c in data.get("citations", [])],
            timings={k: float(v) for k, v in (data.get("timings") or {}).items()},
            provider=data.get("provider"),
            model=data.get("model"),
            reranker=data.get("reranker"),
            hyde=data.get("hyde") or "off",
            retrieval_query=data.get("retrieval_query"),
            outlines=[Outline.from_dict(o) for o in data.get("graph_context") or []],
            error=data.get("error"),
            history_sent=int(data.get("history_sent") or 0),
            history_trimmed=int(data.get("history_trimmed") or 0),
            cancelled=bool(data.get("cancelled")),
        )


class _Background:
    """A daemon thread with a result: an abandoned HyDE call must not hold the CLI's exit."""

    def __init__(self, fn: Callable[[], str]) -> None:
        self._fn = fn
        self._done = threading.Event()
        self.result: str | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._run, daemon=True, name="gbr-hyde").start()

    def _run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:  # reported to the waiting thread, never lost
            self.error = exc
        finally:
            self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(max(0.0, timeout))


class Oracle:
    def __init__(
        self,
        searcher: Searcher,
        provider: LlmProvider | None,
        reranker: Reranker | None = None,
    ) -> None:
        self.searcher = searcher
        self.provider = provider
        self.reranker = reranker

    def wants_hyde(self, question: str, options: AskOptions) -> bool:
        if options.dry_run or self.provider is None or options.hyde is False:
            return False
        return not looks_like_code(question)

    def retrieve(
        self,
        question: str,
        options: AskOptions,
        notes: Notes,
        history: Sequence[Message] = (),
    ) -> list[Hit]:
        """Hybrid hits, fused with a HyDE snippet's neighbours when it arrives in time.

        A follow-up in a conversation is also retrieved with the turn before it (and with the
        provider's standalone rewrite when that arrives in time), since it rarely names its
        subject; the question alone still counts, in case the subject changed.
        """
        started = time.perf_counter()
        use_reranker = options.rerank and self.reranker is not None
        wanted = options.candidates if use_reranker else max(options.max_chunks * 2, 10)
        depth = max(self.searcher.fusion.depth, wanted * 2)
        followup = followup_query(question, history)
        # Only a question that leans on the earlier turn is worth an extra LLM call to rewrite.
        leaning = followup is not None and leans_on_history(question)
        condense = self._start_condense(question, history, options) if leaning else None
        hyde_text = followup or question
        hyde = self._start_hyde(hyde_text) if self.wants_hyde(question, options) else None
        where = Filter(tests=options.tests)
        retrieval = self.searcher.retrieve(question, "hybrid", where, depth=depth)
        if followup is not None:
            fused = self._with_conversation(
                question, followup, condense, retrieval.fused, started, options, notes, where
            )
            retrieval = replace(retrieval, fused=fused)
        notes.timings["retrieve"] = time.perf_counter() - started
        # A rewritten follow-up is one question the second model can read; a follow-up
        # joined to its turn is two, and the conversation's fused ranking decides alone.
        second_query = None if followup is None else notes.retrieval_query
        if second_query == followup:
            second_query = ""
        # Ranked while the guess is on its way; the answer's hits when it never comes.
        hits = self.searcher.finish(question, retrieval, wanted, where, second_query=second_query)
        if hyde is not None:
            fused = self._fuse_hyde(hyde, retrieval.fused, started, options, notes, depth, where)
            if fused is not retrieval.fused:
                guessed = replace(retrieval, fused=fused)
                with_guess = self.searcher.finish(
                    question, guessed, wanted, where, second_query=second_query
                )
                hits = kept_first(hits[: plain_kept(options)], with_guess, wanted)
        if use_reranker and self.reranker is not None:
            t = time.perf_counter()
            hits = self.reranker.rerank(question, hits)
            notes.reranker = self.reranker.name
            notes.timings["rerank"] = time.perf_counter() - t
        return hits

    def _start_condense(
        self, question: str, history: Sequence[Message], options: AskOptions
    ) -> _Background | None:
        provider = self.provider
        # --no-hyde means no LLM call before the answer: the rewrite is off with HyDE.
        if provider is None or options.dry_run or options.hyde is False:
            return None
        messages = condense_messages(question, history)
        return _Background(lambda: provider.complete(messages, max_tokens=120, temperature=0.0))

    def _with_conversation(
        self,
        question: str,
        followup: str,
        condense: _Background | None,
        ranked: list[tuple[int, float]],
        started: float,
        options: AskOptions,
        notes: Notes,
        where: Filter,
    ) -> list[tuple[int, float]]:
        """The question's ranking fused with the conversation's (and the rewrite's, if in time)."""
        depth = len(ranked) or self.searcher.fusion.depth
        lists = {
            "question": [doc for doc, _ in ranked],
            "followup": [
                doc for doc, _ in self.searcher.ranked_ids(followup, "hybrid", where, depth)
            ],
        }
        notes.retrieval_query = followup
        if condense is not None:
            arrived = condense.wait(options.hyde_timeout - (time.perf_counter() - started))
            rewritten = (condense.result or "").strip().splitlines()
            if arrived and condense.error is None and rewritten:
                notes.retrieval_query = rewritten[0].strip()
                lists["condensed"] = [
                    doc
                    for doc, _ in self.searcher.ranked_ids(
                        notes.retrieval_query, "hybrid", where, depth
                    )
                ]
            else:
                reason = "time box" if not arrived else _describe(condense.error or ValueError())
                log().info("condense_skipped", reason=reason)
        # A question that leans on the earlier turn lacks its subject, so the conversation's
        # ranking leads; a standalone one leads itself, so a new subject is not dragged back.
        leaning = leans_on_history(question)
        weights = {"question": 1.0 if leaning else 2.0, "followup": 2.0 if leaning else 1.0}
        return rrf(lists, weights={**weights, "condensed": 2.0})

    def _start_hyde(self, question: str) -> _Background:
        provider = self.provider
        assert provider is not None
        messages = [Message("system", HYDE_SYSTEM_PROMPT), Message("user", question)]
        return _Background(lambda: provider.complete(messages, max_tokens=300, temperature=0.2))

    def _fuse_hyde(
        self,
        hyde: _Background,
        ranked: list[tuple[int, float]],
        started: float,
        options: AskOptions,
        notes: Notes,
        depth: int,
        where: Filter,
    ) -> list[tuple[int, float]]:
        """Plain retrieval wins whenever HyDE is late or fails: the time box is a promise."""
        arrived = hyde.wait(options.hyde_timeout - (time.perf_counter() - started))
        notes.timings["hyde"] = time.perf_counter() - started
        if not arrived:
            notes.hyde = "timed_out"
            log().info("hyde_skipped", reason="time box", seconds=options.hyde_timeout)
            return ranked
        if hyde.error is not None or not (hyde.result or "").strip():
            notes.hyde = "failed"
            log().info("hyde_skipped", reason=_describe(hyde.error) if hyde.error else "empty")
            return ranked
        vector = self.searcher.embedder.embed_batch([_strip_fences(hyde.result or "")])[0]
        hyde_ids = [doc for doc, _ in self.searcher.dense_by_vector(vector, depth, where)]
        notes.hyde = "used"
        # The question's own ranking counts double: HyDE adds recall, it must not take over.
        return rrf(
            {"question": [doc for doc, _ in ranked], "hyde": hyde_ids},
            weights={"question": 2.0, "hyde": 1.0},
        )

    def prepare(
        self,
        question: str,
        options: AskOptions,
        history: Sequence[Message] = (),
    ) -> Answer:
        """Retrieve for `question` alone, then fit earlier turns and context into the budget:
        the answer with its chunks and prompt, before the LLM is asked.

        Earlier turns take at most `history_share` of the budget, newest first, and the
        context gets what they leave; with no history the context has the whole budget.
        """
        notes = Notes()
        hits = self.retrieve(question, options, notes, history)
        hits = hits[: options.max_chunks * 3]
        turns = fit_history(history, int(options.budget * options.history_share))
        budget = options.budget - message_tokens(turns)
        chunks = edges_first(select(hits, budget, options.max_chunks))
        outlines: list[Outline] = []
        if options.graph_context:
            left = budget - context_tokens(chunks)
            outlines = used_outlines(chunks, self._used_by, left)
        return Answer(
            question=question,
            chunks=chunks,
            messages=[
                Message("system", SYSTEM_PROMPT),
                *turns,
                Message("user", user_prompt(question, render_with_outlines(chunks, outlines))),
            ],
            timings=notes.timings,
            provider=self.provider.name if self.provider is not None else None,
            model=self.provider.model if self.provider is not None else None,
            reranker=notes.reranker,
            hyde=notes.hyde,
            history_sent=len(turns),
            history_trimmed=sum(m.role != "system" for m in history) - len(turns),
            retrieval_query=notes.retrieval_query,
            outlines=outlines,
        )

    def _used_by(self, spans: Sequence[Span]) -> Sequence[tuple[int, Definition]]:
        return GraphReader(self.searcher.store).used_by(spans)

    def answer(
        self,
        question: str,
        options: AskOptions,
        on_token: TokenSink | None = None,
        history: Sequence[Message] = (),
        cancel: threading.Event | None = None,
        on_context: ContextSink | None = None,
    ) -> Answer:
        """Retrieve and, unless dry-run or no provider, stream the LLM's answer.

        `history` holds earlier user and assistant turns of a conversation (see `prepare`).
        Setting `cancel` stops the stream at its next delta and closes the response, so a
        chat can take Ctrl-C without leaving a request running; the answer says `cancelled`.
        `on_context` hears the answer once retrieval is over: the index is no longer read
        after that, so a caller can let go of it during the (long) LLM call, and a client
        can show the sources before the first token.
        """
        started = time.perf_counter()
        prepared = self.prepare(question, options, history)
        timings = prepared.timings  # this call's own dict: only this thread writes it
        if on_context is not None:
            on_context(prepared)
        if options.dry_run or self.provider is None:
            timings["total"] = time.perf_counter() - started
            return prepared
        parts: list[str] = []
        cancelled = False
        error: str | None = None
        ask_started = time.perf_counter()
        until = time.monotonic() + options.deadline
        size = 0
        stream = None
        try:
            if cancel is not None and cancel.is_set():
                cancelled = True
            else:
                stream = self.provider.stream(
                    prepared.messages, max_tokens=options.max_answer_tokens, until=until
                )
            for delta in stream or ():
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                if not parts:
                    timings["first_token"] = time.perf_counter() - started
                parts.append(delta)
                if on_token is not None:
                    on_token(delta)
                size += len(delta.encode("utf-8", "replace"))
                if size > options.max_answer_bytes:
                    raise AnswerLimitError(cap_message(options.max_answer_bytes))
                if time.monotonic() >= until:
                    raise AnswerLimitError(deadline_message(options.deadline))
        except AnswerLimitError:  # here, or the provider's own stop at the deadline
            over = size > options.max_answer_bytes
            error = cap_message(options.max_answer_bytes) if over else None
            error = error or deadline_message(options.deadline)
            log().warning("ask_stopped", provider=self.provider.name, bytes=size, reason=error)
        except ProviderError as exc:
            error = str(exc)
            log().warning("ask_failed", provider=self.provider.name, error=type(exc).__name__)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # a generator's close ends its `with`, and so the HTTP response
        text = "".join(parts)
        timings["llm"] = time.perf_counter() - ask_started
        outlined = [(o.path, o.start_line, o.end_line) for o in prepared.outlines]
        citations = check_citations(text, prepared.chunks, outlined)
        timings["total"] = time.perf_counter() - started
        return replace(prepared, text=text, citations=citations, error=error, cancelled=cancelled)


def plain_kept(options: AskOptions) -> int:
    """How many of the plain question's best hits stay first when HyDE's guess is used."""
    if options.hyde_keeps is not None:
        return max(0, options.hyde_keeps)
    return max(1, options.max_chunks // 2)


def kept_first(kept: Sequence[Hit], hits: Sequence[Hit], k: int) -> list[Hit]:
    """`kept` ahead of `hits`, each node once, renumbered; k at most.

    Why: an off-topic HyDE guess fills the fused list with its own neighbours, and the
    plain question's best hit fell out of the prompt (issue 30); the guess may add recall
    but never take away what the question alone found first."""
    first = {(h.path, h.kind, h.name) for h in kept}
    merged = [*kept, *(h for h in hits if (h.path, h.kind, h.name) not in first)]
    return [replace(hit, rank=n) for n, hit in enumerate(merged[:k], start=1)]


def _strip_fences(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if not ln.strip().startswith("```")]
    return "\n".join(lines)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class AskOutcome:
    """An answer as every front end reports it: the `ask --json` object and the exit code."""

    answer: dict[str, Any]
    error: str | None = None
    exit_code: int = 0  # what `gleambrctl ask` exits with for this answer
    result: Answer | None = field(default=None, kw_only=True)
    """The same answer as a record (a chat renders it); its `error` is the outcome's."""


def outcome_of(answer: Answer, dry_run: bool, missing: MissingKeyError | None) -> AskOutcome:
    """One reading of an Answer for the CLI, the daemon and MCP, so their JSON cannot drift.

    A missing key is not the Oracle's failure (it answered from retrieval alone), so it is
    passed in; a dry run adds the exact prompt that would have been sent.
    """
    data = answer.as_dict()
    if dry_run:
        data["prompt"] = [{"role": m.role, "content": m.content} for m in answer.messages]
    if missing is not None:
        data["error"] = str(missing)
        result = replace(answer, error=str(missing))
        return AskOutcome(data, str(missing), missing.exit_code, result=result)
    if answer.error is not None:
        return AskOutcome(data, answer.error, ProviderError.exit_code, result=answer)
    return AskOutcome(data, result=answer)
