"""bench/experiments/train_silver_ranker.py: training on pools read from a real index learns
the signal its labels follow, and the ranker it writes reorders real searches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.experiments.train_silver_ranker import FEATURE_SETS, Mix, metrics, pool_of, train
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.ranker import FEATURES, load_ranker
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.rank.second_opinion import SecondOpinion, second_model_files
from gbr.core.store.facade import Store
from tests.conftest import Indexed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def searcher(
    tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed, model: OnnxEmbedder
) -> Iterator[Searcher]:
    root = indexed_small_template.copy(tmp_path_factory.mktemp("train") / "small")
    files = second_model_files({})
    assert files is not None
    ranking = replace(Ranking.default({}), second=SecondOpinion(files))
    with Store.open(root / ".gbr" / "index.duckdb", read_only=True) as store:
        yield Searcher(store, model, ranking=ranking)


def questions() -> list[str]:
    """The example's hand-written questions in words (the small index holds five of its files)."""
    lines = (REPO / "bench" / "queries" / "bookshelf.jsonl").read_text().splitlines()
    return [json.loads(line)["query"] for line in lines if '"kind": "nl"' in line][:16]


def test_training_learns_what_the_labels_follow_and_lifts_the_targets(
    searcher: Searcher, tmp_path: Path
) -> None:
    """Real pools, a synthetic label: the target is the hit the second model likes best.
    The first order puts it first for only some queries; the trained weights lift it."""
    col = FEATURES.index("second_rrank")
    groups = []
    for query in questions():
        unlabelled = pool_of(searcher, query, set(), "small")
        assert unlabelled is not None, f"the second opinion runs for {query!r}"
        y = unlabelled.x[:, col] == 1.0
        groups.append(replace(unlabelled, y=y, targets=1))
    before = metrics(groups, None)
    assert before["R@1"] < 0.8, "the first order already agrees with the labels: no test"
    ranker = train(groups, 0.01, FEATURE_SETS["all"])
    after = metrics(groups, ranker)
    assert after["MRR@10"] > before["MRR@10"] and after["R@1"] > before["R@1"]
    strongest = max(zip(ranker.columns, np.abs(ranker.weights), strict=True), key=lambda kv: kv[1])
    assert strongest[0].startswith("second_"), strongest

    # The file it writes loads, and a search with it puts the label's hit first.
    path = tmp_path / "learned.json"
    path.write_text(json.dumps(ranker.as_json()))
    learned = replace(searcher.ranking, ranker=load_ranker(path))
    with_it = Searcher(searcher.store, searcher.embedder, ranking=learned)
    query = questions()[0]
    pool = pool_of(searcher, query, set(), "small")
    assert pool is not None
    hits = with_it.search(query, k=10)
    wanted = int(np.flatnonzero(pool.x[:, col] == 1.0)[0])
    top = pool_of(with_it, query, {(hits[0].path, hits[0].name)}, "small")
    assert top is not None and top.y[wanted]


def test_labels_the_first_order_already_gets_right_stay_right(searcher: Searcher) -> None:
    """Trained on pools whose target is the first hit, the model keeps it first, and the
    shipped mix is scored from the same columns."""
    groups = []
    for query in questions()[:8]:
        pool = pool_of(searcher, query, set(), "small")
        assert pool is not None
        y = np.zeros(len(pool.y), dtype=bool)
        y[0] = True
        groups.append(replace(pool, y=y, targets=1))
    assert metrics(groups, None)["R@1"] == 1.0
    assert metrics(groups, train(groups, 0.01, FEATURE_SETS["all"]))["R@1"] == 1.0
    assert 0.0 <= metrics(groups, Mix())["R@1"] <= 1.0  # type: ignore[arg-type]
