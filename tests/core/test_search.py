"""Fusion and ranking, with expectations computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gbr.core.search import rrf, top_k_cosine


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
