"""Fusion and ranking, with expectations computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gbr.core.rank.search import (
    Filter,
    Fusion,
    convex,
    looks_like_code,
    rrf,
    scaled,
    top_k_cosine,
)
from gbr.core.store.queries import filter_sql


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    fused = dict(rrf({"dense": [1, 2, 3], "bm25": [3, 1]}, k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)


def test_rrf_orders_by_fused_score() -> None:
    # 1: 1/61 + 1/62 = 0.03252; 3: 1/63 + 1/61 = 0.03227; 2: 1/62 = 0.01613
    assert [doc for doc, _ in rrf({"dense": [1, 2, 3], "bm25": [3, 1]})] == [1, 3, 2]


def test_rrf_agreement_beats_a_single_first_place() -> None:
    # 7 is second in both lists (2/62 = 0.0323), 5 is first in one only (1/61 = 0.0164).
    ranked = rrf({"a": [5, 7], "b": [9, 7]})
    assert ranked[0][0] == 7


def test_rrf_weights_scale_each_list() -> None:
    fused = dict(rrf({"dense": [1], "bm25": [2]}, k=10, weights={"dense": 2.0, "bm25": 0.5}))
    assert fused[1] == pytest.approx(2.0 / 11)
    assert fused[2] == pytest.approx(0.5 / 11)


def test_rrf_smaller_k_sharpens_the_top() -> None:
    flat = dict(rrf({"a": [1, 2]}, k=60))
    sharp = dict(rrf({"a": [1, 2]}, k=1))
    assert sharp[1] / sharp[2] > flat[1] / flat[2]


def test_rrf_of_nothing_is_empty() -> None:
    assert rrf({"dense": [], "bm25": []}) == []


def test_top_k_cosine_returns_best_rows_in_order() -> None:
    matrix = np.array([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6]], dtype=np.float32)
    idx, scores = top_k_cosine(matrix, np.array([1, 0], dtype=np.float32), 3)
    assert idx.tolist() == [0, 3, 2]
    np.testing.assert_allclose(scores, [1.0, 0.8, 0.6], rtol=1e-6)


def test_top_k_cosine_caps_k_at_the_number_of_rows() -> None:
    matrix = np.eye(2, dtype=np.float32)
    idx, _ = top_k_cosine(matrix, np.array([0, 1], dtype=np.float32), 10)
    assert idx.tolist() == [1, 0]


def test_convex_scales_each_list_to_unit_range_and_mixes_by_weight() -> None:
    # dense: 0.9 -> 1, 0.5 -> 0.5, 0.1 -> 0;  bm25: 8 -> 1, 2 -> 0
    fused = dict(
        convex(
            {"dense": [(1, 0.9), (2, 0.5), (3, 0.1)], "bm25": [(3, 8.0), (4, 2.0)]},
            {"dense": 0.7, "bm25": 0.3},
        )
    )
    assert fused[1] == pytest.approx(0.7)
    assert fused[2] == pytest.approx(0.35)
    assert fused[3] == pytest.approx(0.3)
    assert fused[4] == pytest.approx(0.0)


def test_convex_keeps_a_clear_dense_winner_that_rrf_would_tie() -> None:
    rankings = {"dense": [(1, 0.95), (2, 0.20), (3, 0.19)], "bm25": [(2, 5.0), (1, 1.0)]}
    assert convex(rankings, {"dense": 0.7, "bm25": 0.3})[0][0] == 1
    ids = {name: [doc for doc, _ in r] for name, r in rankings.items()}
    first, second = rrf(ids)[:2]
    assert first[1] == pytest.approx(second[1])  # RRF sees a tie


def test_scaled_max_keeps_a_flat_list_high_and_z_floors_below_the_mean_at_zero() -> None:
    flat, steep = [0.62, 0.60, 0.58], [0.9, 0.3, 0.1]
    assert scaled(flat, "minmax") == pytest.approx([1.0, 0.5, 0.0])
    assert scaled(flat, "max") == pytest.approx([1.0, 0.60 / 0.62, 0.58 / 0.62])
    assert scaled(steep, "max")[2] < scaled(flat, "max")[2]
    z = scaled(steep, "z")
    assert z[0] > 1.0 and z[1] == 0.0 and z[2] == 0.0
    assert scaled([2.0, 2.0], "z") == [1.0, 1.0]


def test_fusion_norm_changes_which_list_wins_a_close_call() -> None:
    """Document 2 is a close second in a flat dense list and first in BM25: min-max stretches
    the dense gap to half the scale, so dense's first stays first; max scaling keeps the near
    tie a near tie, and BM25 decides it."""
    rankings = {"dense": [(1, 0.62), (2, 0.60), (3, 0.58)], "bm25": [(2, 4.0), (1, 3.0)]}
    assert Fusion(norm="minmax").fuse("a sentence", rankings)[0][0] == 1
    assert Fusion(norm="max").fuse("a sentence", rankings)[0][0] == 2


def test_convex_of_a_single_item_list_scales_it_to_one() -> None:
    assert convex({"bm25": [(7, 3.2)]}, {"bm25": 0.3}) == [(7, pytest.approx(0.3))]


@pytest.mark.parametrize(
    "query",
    [
        "map_loop",
        "list.map",
        "LoanError",
        "gleam/list",
        "where is calculate_fine defined",
        "sendAfter",
    ],
)
def test_identifier_like_queries_are_recognised(query: str) -> None:
    assert looks_like_code(query)


@pytest.mark.parametrize(
    "query", ["how do I parse an isbn", "edit distance between two strings", "overdue loans report"]
)
def test_sentences_are_not_code(query: str) -> None:
    assert not looks_like_code(query)


def test_fusion_leans_on_bm25_for_identifiers_and_on_vectors_for_sentences() -> None:
    fusion = Fusion(alpha=0.7, code_alpha=0.5)
    assert fusion.weights("handle_request") == {"dense": 0.5, "bm25": 0.5}
    assert fusion.weights("route a request") == pytest.approx({"dense": 0.7, "bm25": 0.3})


def test_rrf_fusion_uses_alpha_as_list_weights() -> None:
    fusion = Fusion(method="rrf", alpha=0.5, code_alpha=0.5, rrf_k=60)
    fused = dict(fusion.fuse("a sentence", {"dense": [(1, 0.9)], "bm25": [(2, 4.0), (1, 1.0)]}))
    assert fused[1] == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert fused[2] == pytest.approx(0.5 / 61)


def test_filter_builds_sql_for_prefix_glob_module_and_kinds() -> None:
    where, params = filter_sql(
        Filter(path="src/bookshelf/", module="bookshelf/isbn", kinds=("type",))
    )
    assert where == (
        "starts_with(path, ?) AND (module = ? OR starts_with(module, ?)) AND kind IN (?)"
    )
    assert params == ["src/bookshelf/", "bookshelf/isbn", "bookshelf/isbn/", "type"]
    assert filter_sql(Filter(path="test/*_test.gleam")) == ("path GLOB ?", ["test/*_test.gleam"])
    assert filter_sql(Filter()) == ("true", []) and not Filter()
