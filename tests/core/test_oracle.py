"""The Oracle against the fake LLM server: context, streaming, citations, HyDE, failures."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embedder import OnnxEmbedder
from gbr.core.llm.base import ProviderSettings
from gbr.core.llm.openai_compat import OpenAICompatProvider
from gbr.core.oracle import AskOptions, Oracle
from gbr.core.prompt import HYDE_SYSTEM_PROMPT, SYSTEM_PROMPT
from gbr.core.rerank import LlmReranker
from gbr.core.search import Searcher
from gbr.core.store import Store
from tests.conftest import EXAMPLE, SMALL_FILES
from tests.fake_llm import FakeLlm, Reply


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    root = tmp_path_factory.mktemp("oracle") / "small"
    for rel in SMALL_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXAMPLE / rel, root / rel)
    db = root / ".gbr" / "index.duckdb"
    run_index(IndexOptions(root=root, db=db), model)
    return db


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
