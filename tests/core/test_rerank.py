"""Rerankers: a real (tiny) ONNX cross-encoder, and the LLM reranker against scripted replies."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from structlog.testing import capture_logs
from tokenizers import Tokenizer

from gbr.core.errors import ConfigError
from gbr.core.rank.rerank import (
    CrossEncoderReranker,
    LlmReranker,
    Message,
    load_reranker,
    parse_ranking,
    passage_text,
)
from gbr.core.records import Hit
from tests.tiny_models import build_tiny_cross_encoder


def make_hit(rank: int, name: str, text: str, score: float = 0.5) -> Hit:
    return Hit(
        rank=rank,
        path=f"src/app/{name}.gleam",
        module=f"app/{name}",
        name=name,
        kind="function",
        start_line=rank * 10,
        end_line=rank * 10 + 4,
        score=score,
        text=text,
        signature=f"pub fn {name}()",
    )


def hits_from(texts: dict[str, str]) -> list[Hit]:
    return [make_hit(i, name, text) for i, (name, text) in enumerate(texts.items(), start=1)]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="module")
def cross(tiny_dir: Path) -> CrossEncoderReranker:
    return CrossEncoderReranker(tiny_dir)


# --- The tiny model itself -------------------------------------------------------------


def test_tiny_model_counts_passage_tokens_seen_in_the_query(tiny_dir: Path) -> None:
    tokenizer = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    enc = tokenizer.encode("parse json string", "parse json into a user string json")
    assert enc.type_ids == [0] * 5 + [1] * 8  # [CLS] a b c [SEP] | 7 words + [SEP]
    session = ort.InferenceSession(str(tiny_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([enc.ids], dtype=np.int64)
    feeds = {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
    }
    (logits,) = session.run(None, feeds)
    # parse, json, string, json match; "into" and "a" are [UNK], [SEP] is special.
    assert logits.shape == (1, 1)
    assert logits[0, 0] == 4.0


# --- Cross-encoder ---------------------------------------------------------------------


def test_cross_encoder_puts_the_passage_sharing_most_query_words_first(
    cross: CrossEncoderReranker,
) -> None:
    hits = hits_from(
        {
            "sort_users": "sort list of user",
            "parse_int": "parse int",
            "parse_json": "parse json string to a result",
        }
    )
    reranked = cross.rerank("parse json string", hits)
    assert [h.name for h in reranked] == ["parse_json", "parse_int", "sort_users"]
    assert [h.score for h in reranked] == [3.0, 1.0, 0.0]
    assert [h.rank for h in reranked] == [1, 2, 3]


def test_cross_encoder_keeps_every_hit_and_its_fields(cross: CrossEncoderReranker) -> None:
    hits = hits_from({"a": "map list", "b": "fold list", "c": "http request"})
    reranked = cross.rerank("http request", hits)
    by_name = {h.name: h for h in hits}
    assert len(reranked) == len(hits)
    for hit in reranked:
        original = by_name.pop(hit.name)
        assert replace(hit, rank=original.rank, score=original.score) == original


def test_cross_encoder_ties_keep_the_retrieval_order(cross: CrossEncoderReranker) -> None:
    hits = hits_from({"first": "map", "second": "fold", "third": "json"})
    reranked = cross.rerank("json", hits)
    assert [h.name for h in reranked] == ["third", "first", "second"]


def test_cross_encoder_passage_includes_path_name_and_signature() -> None:
    hit = make_hit(1, "decode", "let x = 1\n" * 500)
    text = passage_text(hit, max_chars=100)
    assert text.startswith("src/app/decode.gleam decode pub fn decode()\nlet x = 1")
    assert len(text) == 100


def test_cross_encoder_scores_the_name_too(cross: CrossEncoderReranker) -> None:
    hits = [make_hit(1, "sort", "fn body"), make_hit(2, "decode", "fn body")]
    assert [h.name for h in cross.rerank("decode", hits)] == ["decode", "sort"]


def test_batch_padding_does_not_change_scores(tiny_dir: Path) -> None:
    short = "parse json"
    long = "json " * 40 + "parse string map filter fold"
    alone = CrossEncoderReranker(tiny_dir, batch_size=1).score("parse json string", [short])
    padded = CrossEncoderReranker(tiny_dir, batch_size=8).score("parse json string", [short, long])
    assert padded[0] == alone[0] == 2.0
    assert padded[1] == 42.0


def test_truncation_caps_the_pair_at_max_length(tiny_dir: Path) -> None:
    reranker = CrossEncoderReranker(tiny_dir, max_length=8)
    # [CLS] json [SEP] + 4 passage words + [SEP]: only 4 of the 20 "json" survive.
    assert reranker.score("json", ["json " * 20])[0] == 4.0


def test_cross_encoder_reads_the_hugging_face_layout(tmp_path: Path) -> None:
    model_dir = build_tiny_cross_encoder(tmp_path / "hf")
    (model_dir / "onnx").mkdir()
    (model_dir / "model.onnx").rename(model_dir / "onnx" / "model.onnx")
    hits = hits_from({"a": "sort", "b": "sort json"})
    assert CrossEncoderReranker(model_dir).rerank("json", hits)[0].name == "b"


@pytest.mark.parametrize("missing", ["model.onnx", "tokenizer.json"])
def test_missing_file_is_a_config_error_naming_it(tmp_path: Path, missing: str) -> None:
    model_dir = build_tiny_cross_encoder(tmp_path / "model")
    (model_dir / missing).unlink()
    with pytest.raises(ConfigError, match=missing):
        CrossEncoderReranker(model_dir)


def test_missing_folder_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no-such-model"):
        CrossEncoderReranker(tmp_path / "no-such-model")


def test_unreadable_model_is_a_config_error(tmp_path: Path) -> None:
    model_dir = build_tiny_cross_encoder(tmp_path / "model")
    (model_dir / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="cannot load ONNX model"):
        CrossEncoderReranker(model_dir)


def test_cross_encoder_failing_at_run_time_keeps_input_order(tmp_path: Path) -> None:
    # A fixed sequence length of 4: onnxruntime rejects the longer pairs below.
    reranker = CrossEncoderReranker(build_tiny_cross_encoder(tmp_path / "fixed", seq_len=4))
    hits = hits_from({"a": "sort", "b": "json json"})
    with capture_logs() as events:
        reranked = reranker.rerank("json", hits)
    assert [h.name for h in reranked] == ["a", "b"]
    assert [h.score for h in reranked] == [0.5, 0.5]
    assert [e["event"] for e in events] == ["rerank_failed"]
    assert events[0]["log_level"] == "warning"


def test_cross_encoder_with_no_hits(cross: CrossEncoderReranker) -> None:
    assert cross.rerank("json", []) == []


# --- LLM, listwise ---------------------------------------------------------------------


class ScriptedModel:
    """A CompletionModel that returns a fixed reply (or raises), and records each call."""

    name = "scripted"

    def __init__(self, reply: str | Exception) -> None:
        self.reply = reply
        self.calls: list[list[Message]] = []

    def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> str:
        self.calls.append(list(messages))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


FOUR = {"alpha": "fn alpha() { 1 }", "beta": "fn beta() { 2 }", "gamma": "", "delta": "x"}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[3, 1, 2, 4]", ["gamma", "alpha", "beta", "delta"]),
        ("Sure! ```json\n[4, 2, 1, 3]\n``` Hope that helps.", ["delta", "beta", "alpha", "gamma"]),
        ("3 > 1 > 2 > 4", ["gamma", "alpha", "beta", "delta"]),
        ("[3] > [1] > [2]", ["gamma", "alpha", "beta", "delta"]),
        ('["2", "4", "1", "3"]', ["beta", "delta", "alpha", "gamma"]),
        ("[3, 3, 1, 3]", ["gamma", "alpha", "beta", "delta"]),  # repeats
        ("[9, 0, 4, -1, 2]", ["delta", "beta", "alpha", "gamma"]),  # out of range
        ("[2]", ["beta", "alpha", "gamma", "delta"]),  # missing appended in order
        ("The top 3: [4, 1]", ["delta", "alpha", "beta", "gamma"]),  # prose numbers ignored
        ("<think>maybe [1, 2]</think>[2, 1]", ["beta", "alpha", "gamma", "delta"]),
    ],
)
def test_llm_reply_formats(reply: str, expected: list[str]) -> None:
    reranked = LlmReranker(ScriptedModel(reply)).rerank("query", hits_from(FOUR))
    assert [h.name for h in reranked] == expected
    assert [h.rank for h in reranked] == [1, 2, 3, 4]
    assert [h.score for h in reranked] == [1.0, 0.75, 0.5, 0.25]


@pytest.mark.parametrize("reply", ["", "I cannot rank these.", "[0, 7]", "{}", "[]"])
def test_parse_ranking_without_a_candidate_is_none(reply: str) -> None:
    assert parse_ranking(reply, 4) is None


@pytest.mark.parametrize("reply", ["I cannot rank these, sorry.", "[99, 100]"])
def test_llm_garbage_keeps_input_order_and_logs(reply: str) -> None:
    hits = hits_from(FOUR)
    with capture_logs() as events:
        reranked = LlmReranker(ScriptedModel(reply)).rerank("query", hits)
    assert reranked == hits
    assert [e["event"] for e in events] == ["rerank_failed"]
    assert events[0]["reranker"] == "llm:scripted"


def test_llm_exception_keeps_input_order_and_logs() -> None:
    hits = [replace(h, rank=7) for h in hits_from(FOUR)]  # stale ranks get renumbered
    with capture_logs() as events:
        reranked = LlmReranker(ScriptedModel(TimeoutError("read timed out"))).rerank("q", hits)
    assert [h.name for h in reranked] == list(FOUR)
    assert [h.rank for h in reranked] == [1, 2, 3, 4]
    assert [h.score for h in reranked] == [h.score for h in hits]
    assert events[0]["event"] == "rerank_failed"
    assert "TimeoutError: read timed out" in events[0]["reason"]


def test_llm_never_drops_or_invents_hits() -> None:
    hits = hits_from({f"f{i}": f"fn f{i}()" for i in range(12)})
    reranked = LlmReranker(ScriptedModel("[12, 5, 5, 40, 1]")).rerank("q", hits)
    assert sorted(h.name for h in reranked) == sorted(h.name for h in hits)
    assert [h.name for h in reranked[:3]] == ["f11", "f4", "f0"]
    assert [h.rank for h in reranked] == list(range(1, 13))


def test_llm_prompt_lists_every_candidate_with_path_and_name() -> None:
    model = ScriptedModel("[1, 2, 3, 4]")
    hits = hits_from(FOUR)
    LlmReranker(model).rerank("how do I parse json?", hits)
    (messages,) = model.calls
    assert [m.role for m in messages] == ["system", "user"]
    user = messages[1].content
    assert "how do I parse json?" in user
    for number, hit in enumerate(hits, start=1):
        line = f"[{number}] {hit.path}:{hit.start_line}-{hit.end_line} {hit.name} (function)"
        assert line in user
    assert "fn alpha() { 1 }" in user
    assert "pub fn gamma()" in user  # an empty text falls back to the signature


def test_llm_prompt_truncates_long_code() -> None:
    model = ScriptedModel("[1, 2]")
    hits = hits_from({"long": "a" * 5000, "short": "b"})
    LlmReranker(model, max_chars_per_hit=100).rerank("q", hits)
    user = model.calls[0][1].content
    assert "a" * 100 + "\n…" in user
    assert "a" * 101 not in user


def test_llm_skips_the_call_for_fewer_than_two_hits() -> None:
    model = ScriptedModel("[1]")
    reranker = LlmReranker(model)
    assert reranker.rerank("q", []) == []
    (only,) = reranker.rerank("q", [make_hit(3, "solo", "x")])
    assert (only.rank, only.score) == (1, 1.0)
    assert model.calls == []


# --- load_reranker ---------------------------------------------------------------------


@pytest.mark.parametrize("spec", [None, "", "none", "off", " OFF "])
def test_load_reranker_off(spec: str | None) -> None:
    assert load_reranker(spec, ScriptedModel("[]")) is None


def test_load_reranker_llm() -> None:
    reranker = load_reranker("llm", ScriptedModel("[]"))
    assert isinstance(reranker, LlmReranker)
    assert reranker.name == "llm:scripted"


def test_load_reranker_llm_without_provider_says_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="the llm reranker needs a provider; set GROQ_API_KEY"):
        load_reranker("llm", None)


def test_load_reranker_cross_encoder_forms(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(load_reranker(f"cross-encoder:{tiny_dir}", None), CrossEncoderReranker)
    assert isinstance(load_reranker(str(tiny_dir), None), CrossEncoderReranker)
    monkeypatch.setenv("GBR_RERANK_MODEL_DIR", str(tiny_dir))
    reranker = load_reranker("cross-encoder", None, os.environ)
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.name == f"cross-encoder:{tiny_dir.name}"


def test_load_reranker_cross_encoder_without_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GBR_RERANK_MODEL_DIR", raising=False)
    with pytest.raises(ConfigError, match="GBR_RERANK_MODEL_DIR"):
        load_reranker("cross-encoder", None, os.environ)


def test_load_reranker_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nowhere"):
        load_reranker(str(tmp_path / "nowhere"), None)


def test_load_reranker_unknown_name() -> None:
    with pytest.raises(ConfigError, match="unknown reranker 'bm42'"):
        load_reranker("bm42", None)
