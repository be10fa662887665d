"""Retrieval metrics, computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.evaluation import (
    Query,
    Target,
    load_queries,
    precision_at,
    recall_at,
    reciprocal_rank,
    score,
)
from gbr.core.errors import ConfigError

Q = Query("q1", "find a and b", "nl", (Target("a.gleam", "a"), Target("b.gleam", "b")))
HITS = [("x.gleam", "x"), ("a.gleam", "a"), ("y.gleam", "y"), ("z.gleam", "z"), ("b.gleam", "b")]


def test_recall_counts_the_share_of_targets_found() -> None:
    assert recall_at(Q, HITS, 1) == 0.0
    assert recall_at(Q, HITS, 2) == 0.5
    assert recall_at(Q, HITS, 5) == 1.0


def test_reciprocal_rank_is_one_over_the_first_relevant_rank() -> None:
    assert reciprocal_rank(Q, HITS) == 0.5
    assert reciprocal_rank(Q, HITS[2:4]) == 0.0
    assert reciprocal_rank(Q, HITS, k=1) == 0.0


def test_precision_at_5() -> None:
    assert precision_at(Q, HITS, 5) == pytest.approx(2 / 5)


def test_score_averages_over_queries() -> None:
    single = Query("q2", "find a", "identifier", (Target("a.gleam", "a"),))
    s = score([(Q, HITS), (single, [("a.gleam", "a")])])
    assert s.n == 2
    assert s.r1 == pytest.approx((0 + 1) / 2)
    assert s.r5 == pytest.approx((1 + 1) / 2)
    assert s.mrr10 == pytest.approx((0.5 + 1) / 2)


def test_load_queries_reroots_targets_and_rejects_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "pkg.jsonl"
    target = '{"file": "src/a.gleam", "name": "a"}'
    good.write_text(f'{{"id": "1", "query": "q", "kind": "nl", "targets": [{target}]}}\n')
    [query] = load_queries(good, prefix="pkg/")
    assert query.targets == (Target("pkg/src/a.gleam", "a"),)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "query": "q"}\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        load_queries(bad)
