"""Retrieval metrics for the eval harness: recall, MRR and precision over ranked hits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gbr.core.errors import ConfigError

QUERY_KINDS = ("nl", "identifier", "howto", "type")


@dataclass(frozen=True, slots=True)
class Target:
    file: str
    name: str


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    query: str
    kind: str
    targets: tuple[Target, ...]


def load_queries(path: Path, prefix: str = "") -> list[Query]:
    """Read a JSONL query file; `prefix` re-roots target files under a multi-package tree."""
    out: list[Query] = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(query_of(json.loads(line), prefix))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}:{n}: not a query line ({exc}); see bench/queries/") from exc
    return out


def query_of(raw: dict[str, Any], prefix: str = "") -> Query:
    """One query line, already parsed; raises KeyError or TypeError when it is not one."""
    targets = tuple(Target(prefix + t["file"], t["name"]) for t in raw["targets"])
    return Query(str(raw["id"]), raw["query"], raw.get("kind", "other"), targets)


def relevant(query: Query, hits: Sequence[tuple[str, str]]) -> list[bool]:
    """For each (path, name) hit in rank order, whether it is one of the query's targets."""
    wanted = {(t.file, t.name) for t in query.targets}
    return [hit in wanted for hit in hits]


def recall_at(query: Query, hits: Sequence[tuple[str, str]], k: int) -> float:
    """Share of the query's targets found in the top k."""
    found = {h for h in hits[:k]} & {(t.file, t.name) for t in query.targets}
    return len(found) / len(query.targets)


def reciprocal_rank(query: Query, hits: Sequence[tuple[str, str]], k: int = 10) -> float:
    for rank, ok in enumerate(relevant(query, hits[:k]), start=1):
        if ok:
            return 1.0 / rank
    return 0.0


def precision_at(query: Query, hits: Sequence[tuple[str, str]], k: int) -> float:
    return sum(relevant(query, hits[:k])) / k


@dataclass(frozen=True, slots=True)
class Scores:
    n: int
    r1: float
    r5: float
    r10: float
    mrr10: float
    p5: float

    def as_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "R@1": round(self.r1, 4),
            "R@5": round(self.r5, 4),
            "R@10": round(self.r10, 4),
            "MRR@10": round(self.mrr10, 4),
            "P@5": round(self.p5, 4),
        }


def score(results: Iterable[tuple[Query, Sequence[tuple[str, str]]]]) -> Scores:
    rows = [
        (
            recall_at(q, h, 1),
            recall_at(q, h, 5),
            recall_at(q, h, 10),
            reciprocal_rank(q, h),
            precision_at(q, h, 5),
        )
        for q, h in results
    ]
    if not rows:
        return Scores(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    n = len(rows)
    cols = [sum(col) / n for col in zip(*rows, strict=True)]
    return Scores(n, *cols)


METRICS = ("R@1", "R@5", "R@10", "MRR@10")


def per_query(results: Iterable[tuple[Query, Sequence[tuple[str, str]]]]) -> np.ndarray:
    """One row per query: R@1, R@5, R@10 and MRR@10 (the columns of METRICS)."""
    rows = [
        (recall_at(q, h, 1), recall_at(q, h, 5), recall_at(q, h, 10), reciprocal_rank(q, h))
        for q, h in results
    ]
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(METRICS))


def bootstrap_interval(
    rows: np.ndarray, samples: int = 2000, level: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap of each column's mean, resampling queries with replacement.

    Queries of one repository are not independent (a repository that suits the ranking
    lifts all of its queries), so this interval is narrower than one that resampled
    repositories; it measures the noise of the question sample, not of the choice of code.
    """
    if len(rows) == 0:
        return {m: (float("nan"), float("nan")) for m in METRICS}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(rows), size=(samples, len(rows)))
    tail = (1 - level) / 2 * 100
    out = {}
    for column, metric in enumerate(METRICS):  # a column at a time: samples x queries floats
        means = rows[:, column][picks].mean(axis=1)
        lo, hi = np.percentile(means, [tail, 100 - tail])
        out[metric] = (round(float(lo), 4), round(float(hi), 4))
    return out


def repository_interval(
    rows: np.ndarray, groups: Sequence[str], samples: int = 2000, level: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    """The same interval resampling whole repositories (with all their queries) instead:
    wider, and the honest one when the question is how a change does on code not yet seen."""
    names = sorted(set(groups))
    if not names:
        return {m: (float("nan"), float("nan")) for m in METRICS}
    at = {name: i for i, name in enumerate(names)}
    index = np.array([at[g] for g in groups])
    sums = np.zeros((len(names), rows.shape[1]))
    np.add.at(sums, index, rows)
    counts = np.bincount(index, minlength=len(names)).astype(np.float64)
    picks = np.random.default_rng(seed).integers(0, len(names), size=(samples, len(names)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)[:, None]  # samples x metrics
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail], axis=0)
    return {
        m: (round(float(a), 4), round(float(b), 4)) for m, a, b in zip(METRICS, lo, hi, strict=True)
    }
