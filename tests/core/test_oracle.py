"""The Oracle against the fake LLM server: context, streaming, citations, HyDE, failures."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from gbr.core.answer.oracle import AskOptions, Notes, Oracle, kept_first, plain_kept
from gbr.core.answer.prompt import (
    HYDE_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    estimate_tokens,
    message_tokens,
)
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.llm.base import Message, ProviderSettings
from gbr.core.llm.openai_compat import OpenAICompatProvider
from gbr.core.rank.rerank import LlmReranker
from gbr.core.rank.search import Searcher
from gbr.core.records import Hit
from gbr.core.store.facade import Store
from tests.conftest import Indexed
from tests.fake_llm import FakeLlm, Reply


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    root = indexed_small_template.copy(tmp_path_factory.mktemp("oracle") / "small")
    return root / ".gbr" / "index.duckdb"


@pytest.fixture
def searcher(small_db: Path, model: OnnxEmbedder) -> Iterator[Searcher]:
    with Store.open(small_db, read_only=True) as store:
        yield Searcher(store, model)


def provider(fake: FakeLlm, retries: int = 0) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        ProviderSettings(
            name="openai", base_url=fake.openai_base_url, model="test-model", max_retries=retries
        )
    )


def is_hyde(body: Any) -> bool:
    return body["messages"][0]["content"] == HYDE_SYSTEM_PROMPT


QUESTION = "how do I check that a book number is valid"


def test_dry_run_builds_headed_context_and_calls_nothing(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    oracle = Oracle(searcher, provider(fake_llm))
    answer = oracle.answer(QUESTION, AskOptions(max_chunks=4, dry_run=True))
    assert fake_llm.requests == []
    system, user = answer.messages
    assert system.content == SYSTEM_PROMPT
    assert len(answer.chunks) == 4
    for chunk in answer.chunks:
        header = f"] {chunk.hit.name} ({chunk.hit.kind}) · {chunk.hit.path}:{chunk.hit.start_line}-"
        assert header in user.content
    assert "is_valid" in [c.hit.name for c in answer.chunks]
    assert user.content.rstrip().endswith(f"Question: {QUESTION}")


def test_context_puts_the_two_best_chunks_at_the_edges(searcher: Searcher) -> None:
    answer = Oracle(searcher, None).answer(QUESTION, AskOptions(max_chunks=5, dry_run=True))
    ranks = [c.hit.rank for c in answer.chunks]
    assert ranks[0] == 1 and ranks[-1] == 2


def test_answer_streams_and_citations_are_checked(searcher: Searcher, fake_llm: FakeLlm) -> None:
    oracle = Oracle(searcher, provider(fake_llm))
    probe = oracle.answer(QUESTION, AskOptions(max_chunks=3, hyde=False, dry_run=True))
    cited = probe.chunks[0].hit
    reply = f"Call it; see {cited.path}:{cited.start_line}. Not src/made/up.gleam:7."
    fake_llm.script(Reply(reply, chunks=5))
    tokens: list[str] = []
    answer = oracle.answer(QUESTION, AskOptions(max_chunks=3, hyde=False), tokens.append)
    assert len(tokens) == 5 and "".join(tokens) == reply == answer.text
    assert [(c.path, c.known) for c in answer.citations] == [
        (cited.path, True),
        ("src/made/up.gleam", False),
    ]
    [request] = fake_llm.requests
    assert request.json["stream"] is True and request.json["model"] == "test-model"
    assert f"### [1] {cited.name} ({cited.kind}) · {cited.path}" in request.prompt
    assert "first_token" in answer.timings and answer.error is None


def test_a_provider_failure_keeps_the_context(searcher: Searcher, fake_llm: FakeLlm) -> None:
    fake_llm.script(Reply.error(401))
    answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions(hyde=False))
    assert answer.error is not None and "401" in answer.error
    assert answer.chunks and answer.text == ""


def test_a_stream_cut_midway_keeps_the_partial_answer(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    fake_llm.script(Reply(chunks=["one ", "two ", "three ", "four"], cut_after=2))
    answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions(hyde=False))
    assert answer.text == "one two "
    assert answer.error is not None


def test_hyde_snippet_is_requested_and_fused(searcher: Searcher, fake_llm: FakeLlm) -> None:
    fake_llm.respond = lambda body: (
        "pub fn is_valid(isbn: String) -> Bool { checksum(isbn) == 0 }"
        if is_hyde(body)
        else "It is isbn.is_valid."
    )
    answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions(max_chunks=4))
    assert answer.hyde == "used"
    assert sum(is_hyde(r.json) for r in fake_llm.requests) == 1
    assert len(fake_llm.requests) == 2
    assert "is_valid" in [c.hit.name for c in answer.chunks]
    assert answer.text == "It is isbn.is_valid."


def test_hyde_late_past_its_time_box_is_dropped_silently(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    def respond(body: Any) -> str:
        if is_hyde(body):
            fake_llm.stopping.wait(1.5)  # far beyond the time box below
            return "pub fn late() { 1 }"
        return "answer"

    fake_llm.respond = respond
    with structlog.testing.capture_logs() as events:
        answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions(hyde_timeout=0.2))
    assert answer.hyde == "timed_out" and answer.text == "answer"
    assert any(e["event"] == "hyde_skipped" and e["reason"] == "time box" for e in events)


def test_hyde_failure_falls_back_to_plain_retrieval(searcher: Searcher, fake_llm: FakeLlm) -> None:
    def respond(body: Any) -> str:
        if is_hyde(body):
            raise RuntimeError("model overloaded")
        return "plain answer"

    fake_llm.respond = respond
    answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions())
    assert answer.hyde == "failed" and answer.text == "plain answer"
    plain = Oracle(searcher, None).answer(QUESTION, AskOptions(dry_run=True))
    assert [c.hit.name for c in answer.chunks] == [c.hit.name for c in plain.chunks]


def test_hyde_is_off_for_identifiers_and_without_a_provider(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    oracle = Oracle(searcher, provider(fake_llm))
    oracle.answer("isbn.is_valid", AskOptions())
    assert not any(is_hyde(r.json) for r in fake_llm.requests)
    assert Oracle(searcher, None).answer(QUESTION, AskOptions()).hyde == "off"


def test_llm_rerank_reorders_the_candidates(searcher: Searcher, fake_llm: FakeLlm) -> None:
    llm = provider(fake_llm)
    listed: dict[int, str] = {}

    def respond(body: Any) -> str:
        prompt = body["messages"][-1]["content"]
        found = re.findall(r"^\[(\d+)\] \S+ (\S+) \(", prompt, flags=re.M)
        if not found:
            return "the answer"
        listed.update({int(n): name for n, name in found})
        return f"[{max(listed)}, 1]"  # the last candidate is the best one

    fake_llm.respond = respond
    oracle = Oracle(searcher, llm, LlmReranker(llm))
    answer = oracle.answer(QUESTION, AskOptions(rerank=True, hyde=False, max_chunks=3))
    assert answer.reranker == "llm:openai"
    assert len(listed) == 30  # the reranker saw 30 candidates, not the 3 that are sent
    assert answer.chunks[0].hit.name == listed[30]
    assert len(fake_llm.requests) == 2  # one rerank call, one answer


def test_no_timing_is_asserted_but_all_phases_are_recorded(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    started = time.perf_counter()
    answer = Oracle(searcher, provider(fake_llm)).answer(QUESTION, AskOptions(hyde=False))
    assert {"retrieve", "llm", "total"} <= set(answer.timings)
    assert answer.timings["total"] <= time.perf_counter() - started + 1e-6


def test_history_goes_between_the_system_prompt_and_the_question(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    history = [Message("user", "what is an Isbn?"), Message("assistant", "An opaque type.")]
    oracle = Oracle(searcher, provider(fake_llm))
    answer = oracle.answer("and how is it made?", AskOptions(hyde=False), history=history)
    [request] = fake_llm.requests
    assert request.messages[0] == ("system", SYSTEM_PROMPT)
    assert request.messages[1:3] == [("user", "what is an Isbn?"), ("assistant", "An opaque type.")]
    assert request.messages[3][1].endswith("Question: and how is it made?")
    assert answer.history_sent == 2 and answer.history_trimmed == 0


def test_without_history_the_prompt_is_unchanged(searcher: Searcher) -> None:
    oracle = Oracle(searcher, None)
    plain = oracle.answer(QUESTION, AskOptions(dry_run=True))
    empty = oracle.answer(QUESTION, AskOptions(dry_run=True), history=())
    assert plain.messages == empty.messages and len(plain.messages) == 2


def test_history_and_context_share_the_budget(searcher: Searcher) -> None:
    old = [Message("user", "old question"), Message("assistant", "o" * 1400)]  # 400 tokens
    new = [Message("user", "new question"), Message("assistant", "n" * 700)]  # 200 tokens
    options = AskOptions(dry_run=True, budget=1200, max_chunks=20)
    answer = Oracle(searcher, None).answer(QUESTION, options, history=old + new)
    assert answer.messages[1:3] == new  # the older turn did not fit half of the budget
    assert answer.history_sent == 2 and answer.history_trimmed == 2
    context = sum(c.tokens for c in answer.chunks)
    assert context + message_tokens(new) <= 1200
    alone = Oracle(searcher, None).answer(QUESTION, options)
    assert sum(c.tokens for c in alone.chunks) > context  # without history, more context fits
    assert estimate_tokens(answer.messages[-1].content) < estimate_tokens(
        alone.messages[-1].content
    )


def test_cancel_stops_the_stream_and_keeps_what_came(searcher: Searcher, fake_llm: FakeLlm) -> None:
    fake_llm.script(Reply(chunks=["one ", "two ", "three ", "four"]))
    cancel = threading.Event()
    tokens: list[str] = []

    def on_token(delta: str) -> None:
        tokens.append(delta)
        cancel.set()  # as Ctrl-C would, right after the first delta

    answer = Oracle(searcher, provider(fake_llm)).answer(
        QUESTION, AskOptions(hyde=False), on_token, cancel=cancel
    )
    assert answer.cancelled and answer.error is None
    assert tokens == ["one "] and answer.text == "one "


def test_a_cancel_before_the_stream_sends_nothing(searcher: Searcher, fake_llm: FakeLlm) -> None:
    cancel = threading.Event()
    cancel.set()
    answer = Oracle(searcher, provider(fake_llm)).answer(
        QUESTION, AskOptions(hyde=False), cancel=cancel
    )
    assert answer.cancelled and answer.chunks and answer.text == ""
    assert fake_llm.requests == []


# Worded without the answer's name, so HyDE is asked (an identifier never is).
OFF_TOPIC = "what does the catalogue return when a book is looked up"


def test_a_poor_hyde_guess_cannot_push_the_plain_top_hit_out(
    searcher: Searcher, fake_llm: FakeLlm
) -> None:
    """The guess is the code of another file than the plain top hit's, the file of the
    plain ranking's next best hit: fused with it, that hit outranks the first, which fell
    out of a short prompt (issue 30)."""
    plain = Oracle(searcher, None).answer(OFF_TOPIC, AskOptions(max_chunks=2, dry_run=True))
    first = min(plain.chunks, key=lambda c: c.hit.rank).hit
    others = Oracle(searcher, None).retrieve(OFF_TOPIC, AskOptions(hyde=False), Notes())
    second = next(h for h in others if h.path != first.path)
    guess = "\n".join(h.text for h in others if h.path == second.path)
    fake_llm.respond = lambda body: guess if is_hyde(body) else "answer"
    oracle = Oracle(searcher, provider(fake_llm))
    unkept = oracle.prepare(OFF_TOPIC, AskOptions(max_chunks=1, hyde_keeps=0))
    assert unkept.hyde == "used"
    assert first.name not in [c.hit.name for c in unkept.chunks]  # the guess took over
    kept = oracle.prepare(OFF_TOPIC, AskOptions(max_chunks=2))  # keeps half: one
    assert kept.hyde == "used"
    assert first.name in [c.hit.name for c in kept.chunks]
    assert min(kept.chunks, key=lambda c: c.hit.rank).hit.name == first.name
    # The guess still adds: the second chunk is whatever the fused ranking puts next.
    assert len(kept.chunks) == 2


def test_kept_first_puts_the_kept_hits_ahead_once_each() -> None:
    def hit(name: str, rank: int) -> Hit:
        return Hit(rank, "src/a.gleam", "a", name, "function", rank, rank, 1.0, "", "", "")

    kept = [hit("plain_one", 1), hit("plain_two", 2)]
    fused = [hit("guessed", 1), hit("plain_two", 2), hit("other", 3)]
    merged = kept_first(kept, fused, 3)
    assert [(h.name, h.rank) for h in merged] == [
        ("plain_one", 1),
        ("plain_two", 2),
        ("guessed", 3),
    ]
    assert kept_first([], fused, 2) == [fused[0], fused[1]]


def test_hyde_keeps_half_the_chunks_unless_told() -> None:
    assert plain_kept(AskOptions()) == 4
    assert plain_kept(AskOptions(max_chunks=1)) == 1
    assert plain_kept(AskOptions(max_chunks=5)) == 2
    assert plain_kept(AskOptions(hyde_keeps=0)) == 0
    assert plain_kept(AskOptions(hyde_keeps=6, max_chunks=2)) == 6
