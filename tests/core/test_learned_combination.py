"""The learned combination (issue 29): a linear ranker that weighs the second model's scores
takes the place of the fixed half-and-half mix, on a real index with both real models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import ConfigError
from gbr.core.rank.ranker import FEATURES, Candidate, LinearRanker, features, load_ranker
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.rank.second_opinion import SecondOpinion, second_model_files
from gbr.core.store.facade import Store
from tests.conftest import Indexed

QUESTION = "check that an ISBN is valid"


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed
) -> Iterator[Store]:
    root = indexed_small_template.copy(tmp_path_factory.mktemp("learned") / "small")
    with Store.open(root / ".gbr" / "index.duckdb", read_only=True) as opened:
        yield opened


def second(weight: float = 0.5) -> SecondOpinion:
    files = second_model_files({})
    assert files is not None, "the second model ships with the dev install"
    return SecondOpinion(files, weight=weight)


def linear(weights: dict[str, float]) -> LinearRanker:
    """A ranker over the named columns, on raw feature values (mean 0, std 1)."""
    n = len(weights)
    return LinearRanker(
        np.array(list(weights.values())), np.zeros(n), np.ones(n), columns=tuple(weights)
    )


def order(store: Store, model: OnnxEmbedder, ranking: Ranking, query: str = QUESTION) -> list:
    return [(h.path, h.name) for h in Searcher(store, model, ranking=ranking).search(query, k=10)]


def test_the_mix_is_one_of_the_weightings_it_can_learn(store: Store, model: OnnxEmbedder) -> None:
    """Equal weights on both scaled scores give exactly the shipped stage's order; all the
    weight on the second model gives the second model's order, which differs from it."""
    shipped = replace(Ranking.default({}), second=second())
    as_mix = replace(shipped, ranker=linear({"fused_span": 1.0, "second_span": 1.0}))
    assert order(store, model, as_mix) == order(store, model, shipped)
    alone = replace(shipped, ranker=linear({"second_span": 1.0}))
    second_only = replace(shipped, second=second(weight=1.0))
    assert order(store, model, alone) == order(store, model, second_only)
    assert order(store, model, alone) != order(store, model, shipped)
    hits = Searcher(store, model, ranking=as_mix).search(QUESTION, k=10)
    scores = [h.score for h in hits]
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True) and min(scores) >= 0.0
    assert [h.rank for h in hits] == list(range(1, 11))


def test_where_the_second_model_stands_aside_the_first_order_stays(
    store: Store, model: OnnxEmbedder
) -> None:
    """A query that looks like code: no second opinion, so the learned stage does nothing
    (its weights would read columns that are not there)."""
    shipped = replace(Ranking.default({}), second=second())
    learned = replace(shipped, ranker=linear({"second_span": 1.0}))
    first = replace(shipped, second=None)
    for query in ("isbn.parse", "check_digit"):
        assert order(store, model, learned, query) == order(store, model, first, query)
    off = replace(learned, second=None)  # GBR_SECOND_OPINION=off
    assert order(store, model, off) == order(store, model, first)


def candidate(name: str, fused: float) -> Candidate:
    return Candidate(
        path="src/a.gleam",
        module="a",
        name=name,
        kind="function",
        visibility="public",
        signature=f"pub fn {name}()",
        doc="",
        lines=3,
        text=f"pub fn {name}() {{ 1 }}",
        fused=fused,
        fused_rank=1,
    )


def test_the_second_models_columns_read_its_cosines() -> None:
    x = features("q", "prose", "demote", [], None)
    assert x.shape == (0, len(FEATURES))
    pool = [candidate(f"f{i}", fused=1.0 - i / 10) for i in range(3)]
    cos = np.array([0.2, 0.8, 0.5])
    x = features("q", "prose", "demote", pool, cos)
    col = FEATURES.index
    assert np.allclose(x[:, col("second_span")], [0.0, 1.0, 0.5])
    assert x[:, col("second_rrank")].tolist() == [1 / 3, 1.0, 1 / 2]
    assert np.allclose(x[:, col("second_gap")], [-0.6, 0.0, -0.3])
    assert np.allclose(x[:, col("fused_span")], [1.0, 0.5, 0.0])
    without = features("q", "prose", "demote", pool)
    assert not without[:, [col("second_span"), col("second_rrank")]].any()


def test_a_file_over_some_columns_loads_and_one_naming_others_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "learned.json"
    good.write_text(json.dumps(linear({"second_span": 2.0, "dense": -1.0}).as_json()))
    loaded = load_ranker(good)
    assert loaded.columns == ("second_span", "dense") and loaded.reads_second
    assert not linear({"dense": 1.0, "second_span": 0.0}).reads_second
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(good.read_text()), "features": ["second", "x"]}))
    with pytest.raises(ConfigError, match="other features"):
        load_ranker(bad)
    short = tmp_path / "short.json"
    short.write_text(json.dumps({**json.loads(good.read_text()), "weights": [1.0]}))
    with pytest.raises(ConfigError, match="malformed"):
        load_ranker(short)
