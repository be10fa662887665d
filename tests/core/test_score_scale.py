"""What a search's `score` is, per mode, as the README says: hybrid 0-1 (the second model's
mix, or the ranked score as a share of the best), dense the cosine times the priors, bm25
the BM25 score times the priors. Real index, real models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.priors import NO_PRIORS
from gbr.core.rank.search import DEFAULT_PRIORS, Ranking, Searcher
from gbr.core.store.facade import Store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    from tests.conftest import copy_small

    root = copy_small(tmp_path_factory.mktemp("scores") / "pkg")
    path = root / ".gbr" / "index.duckdb"
    run_index(IndexOptions(root=root, db=path), model)
    return path


def searcher(db: Path, model: OnnxEmbedder, ranking: Ranking) -> Searcher:
    return Searcher(Store.open(db, read_only=True), model, ranking=ranking)


@pytest.mark.parametrize("query", ["valid isbn", "is_valid", "check that an ISBN is valid"])
def test_hybrid_scores_lie_between_0_and_1_whatever_the_priors(
    db: Path, model: OnnxEmbedder, query: str
) -> None:
    # Words the code holds verbatim ("valid isbn") and identifiers skip the second opinion,
    # and the priors (x2 for code that holds the query's words) pushed the fused score to 1.95.
    hits = searcher(db, model, Ranking.default({})).search(query, k=10)
    scores = [h.score for h in hits]
    assert hits and all(0.0 <= s <= 1.0 for s in scores), scores
    assert scores == sorted(scores, reverse=True)


def test_without_the_second_opinion_the_best_hit_scores_1_and_the_rest_a_share_of_it(
    db: Path, model: OnnxEmbedder
) -> None:
    plain = searcher(db, model, Ranking(priors=NO_PRIORS)).search("valid isbn", k=10)
    ranked = searcher(db, model, Ranking(priors=DEFAULT_PRIORS)).search("valid isbn", k=10)
    assert ranked[0].name == "is_valid" and ranked[0].score == 1.0
    assert all(0.0 < h.score <= 1.0 for h in ranked) and all(h.score <= 1.0 for h in plain)


def test_a_dense_score_is_the_cosine_and_the_priors_only_multiply_it(
    db: Path, model: OnnxEmbedder
) -> None:
    query = "check that an ISBN is valid"
    plain = searcher(db, model, Ranking(priors=NO_PRIORS)).search(query, k=10, mode="dense")
    with Store.open(db, read_only=True) as store:
        ids, matrix = store.vectors(None, False)
        rows = store.chunk_rows([int(i) for i in ids])
    vector = model.embed_batch([query])[0]
    cosine: dict[tuple[str, str], float] = {}
    for n, i in enumerate(ids):  # a split definition scores by its best part
        key = (rows[int(i)].path, rows[int(i)].name)
        cosine[key] = max(cosine.get(key, -1.0), float(matrix[n] @ vector))
    for hit in plain:
        assert hit.score == pytest.approx(cosine[(hit.path, hit.name)], abs=1e-5)
        assert -1.0 <= hit.score <= 1.0
    primed = searcher(db, model, Ranking(priors=DEFAULT_PRIORS)).search(query, k=30, mode="dense")
    factors = {
        round(h.score / cosine[(h.path, h.name)], 3) for h in primed if cosine[(h.path, h.name)]
    }
    # Each is a product of the priors' factors (tests x0.3, types x0.7 or x1.6, verbatim x2).
    assert factors <= {0.3, 0.7, 1.0, 1.6, 2.0, 0.21, 0.48, 0.6, 1.4, 3.2, 0.42, 0.96}
    assert np.isfinite(list(factors)).all()
