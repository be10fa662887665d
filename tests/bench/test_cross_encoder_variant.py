"""The bench's cross-encoder variant (issue 29): what it reorders, what it leaves alone.

The tiny cross-encoder of tests/tiny_models.py scores a pair by how many passage words the
question shares, so every order below is worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.eval import MixedCrossEncoder, cross_encoder_variant, mixed_cross_encoder
from gbr.core.rank.rerank import CrossEncoderReranker
from gbr.core.records import Hit
from tests.tiny_models import build_tiny_cross_encoder


def _hit(name: str, text: str, score: float) -> Hit:
    return Hit(0, "src/a.gleam", "a", name, "function", 1, 2, score, text)


# Shipped order: the first has no word of the question, the second one, the third two.
HITS = [
    _hit("first", "fn reverse", 0.9),
    _hit("second", "fn sort list", 0.8),
    _hit("third", "fn parse json", 0.7),
    _hit("fourth", "fn parse json string", 0.1),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> CrossEncoderReranker:
    return CrossEncoderReranker(build_tiny_cross_encoder(tmp_path_factory.mktemp("ce")))


def names(hits: list[Hit]) -> list[str]:
    return [h.name for h in hits]


def test_the_model_alone_reorders_the_top_n_and_leaves_the_rest(
    model: CrossEncoderReranker,
) -> None:
    reranker = MixedCrossEncoder(model, n=3, weight=1.0)
    out = reranker.rerank("json parse", HITS)
    # `fourth` shares the most words but lies below the top 3, so it stays last.
    assert names(out) == ["third", "first", "second", "fourth"]
    assert len(reranker.timings_ms) == 1


def test_a_light_weight_only_breaks_near_ties(model: CrossEncoderReranker) -> None:
    # Scaled over the top 3: shipped 1, 0.5, 0 and model 0, 0, 1 (`third` shares two
    # words, the others none of "json parse"); at 0.2 `first` keeps 0.8 against 0.2.
    out = MixedCrossEncoder(model, n=3, weight=0.2).rerank("json parse", HITS)
    assert names(out) == ["first", "second", "third", "fourth"]
    out = MixedCrossEncoder(model, n=3, weight=0.6).rerank("json parse", HITS)
    assert names(out)[0] == "third"


def test_identifiers_and_verbatim_phrases_keep_the_shipped_order(
    model: CrossEncoderReranker,
) -> None:
    reranker = MixedCrossEncoder(model, n=4, weight=1.0)
    assert reranker.rerank("parse_json", HITS) == HITS
    assert reranker.rerank("parse json", HITS) == HITS  # `third` holds it word for word
    assert reranker.timings_ms == []


def test_a_shared_memo_spares_the_model_a_second_pass(model: CrossEncoderReranker) -> None:
    memo: dict[tuple[str, str], float] = {}
    first = MixedCrossEncoder(model, n=4, weight=1.0, memo=memo).rerank("json parse", HITS)
    assert len(memo) == 4
    assert memo[("json parse", "src/a.gleam fourth\nfn parse json string")] == 2.0
    again = MixedCrossEncoder(model, n=4, weight=1.0, memo=memo).rerank("json parse", HITS)
    assert names(again) == names(first) == ["third", "fourth", "first", "second"]


def test_the_spec_names_the_variant_and_reads_the_trained_length(tmp_path: Path) -> None:
    folder = build_tiny_cross_encoder(tmp_path / "ce-x")
    (folder / "training.json").write_text(json.dumps({"max_length": 64}))
    name, reranker = mixed_cross_encoder(f"xe:{folder}:15:0.2")
    assert name == "xe-ce-x-n15-w0.2"
    assert (reranker.n, reranker.weight, reranker.memo) == (15, 0.2, None)
    assert reranker.model._tokenizer.truncation["max_length"] == 64
    name, reranker = mixed_cross_encoder(f"xe:{folder}:10:1.0:32", memo=True)
    assert name == "xe-ce-x-n10-w1.0-len32"
    assert reranker.model._tokenizer.truncation["max_length"] == 32
    assert reranker.memo is not None
    variant = cross_encoder_variant(f"xe:{folder}:10:0.5")
    assert (variant.name, variant.mode, variant.reranker is not None) == (
        "xe-ce-x-n10-w0.5",
        "hybrid",
        True,
    )
