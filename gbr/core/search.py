"""Hybrid retrieval: dense cosine and BM25 rankings, fused.

Two fusions are offered: Reciprocal Rank Fusion and a convex combination of normalised
scores. The default is whichever scored best on our eval sets (see bench/eval.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from gbr.core.chunk_text import code_words
from gbr.core.embedder import Embedder
from gbr.core.errors import ConfigError, IndexEmptyError
from gbr.core.records import ChunkKind, Hit
from gbr.core.store import Store

Mode = Literal["hybrid", "dense", "bm25"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "bm25")
RRF_K = 60


def rrf(
    rankings: Mapping[str, Sequence[int]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of weight / (k + rank), rank from 1.

    Ties keep the order in which ids were first seen, so the result is deterministic.
    """
    scores: dict[int, float] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def top_k_cosine(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and scores of the k rows most similar to a unit query vector."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix @ query
    k = min(k, scores.shape[0])
    idx = np.argpartition(-scores, k - 1)[:k]
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return idx, scores[idx]


_CODE_TOKEN = re.compile(
    r"[a-z0-9]+_[a-z0-9_]+"  # snake_case
    r"|[a-z]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*"  # PascalCase with two humps
    r"|[a-z_][a-z0-9_]*\.[a-z_][A-Za-z0-9_]*"  # module.fn
    r"|[a-z_]+/[a-z_/]+"  # gleam/list
)


def looks_like_code(query: str) -> bool:
    """True when the query names an identifier (`map_loop`, `list.map`, `LoanError`)."""
    words = query.split()
    if any(_CODE_TOKEN.fullmatch(w.strip("`'\"?,():")) for w in words):
        return True
    return len(words) == 1 and bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[0]))


FusionMethod = Literal["cc", "rrf"]


@dataclass(frozen=True, slots=True)
class Fusion:
    """How the dense and BM25 rankings become one; defaults chosen on the dev set.

    `alpha` is the share of the dense ranking (BM25 gets 1 - alpha): the weight of each
    list in RRF, or the mixing factor of the convex combination of min-max normalised
    scores (cc). Identifier-like queries use `code_alpha` instead, leaning on BM25.
    """

    method: FusionMethod = "cc"
    alpha: float = 0.7
    code_alpha: float = 0.5
    depth: int = 50  # candidates taken from each ranking
    rrf_k: int = RRF_K

    def weights(self, query: str) -> dict[str, float]:
        alpha = self.code_alpha if looks_like_code(query) else self.alpha
        return {"dense": alpha, "bm25": 1.0 - alpha}

    def fuse(self, query: str, rankings: Mapping[str, Sequence[tuple[int, float]]]) -> Ranked:
        weights = self.weights(query)
        if self.method == "rrf":
            ids = {name: [doc for doc, _ in ranking] for name, ranking in rankings.items()}
            return rrf(ids, k=self.rrf_k, weights=weights)
        return convex(rankings, weights)


Ranked = list[tuple[int, float]]


def convex(
    rankings: Mapping[str, Sequence[tuple[int, float]]], weights: Mapping[str, float]
) -> Ranked:
    """Sum of weight x score, each list's scores min-max scaled to [0, 1] (absent = 0).

    Unlike RRF it keeps how far apart the scores are, so a clear dense winner is not
    dragged down by a noisy BM25 list. A one-item list scales its item to 1.
    """
    fused: dict[int, float] = {}
    for name, ranking in rankings.items():
        if not ranking:
            continue
        scores = [s for _, s in ranking]
        hi, lo = max(scores), min(scores)
        weight = weights.get(name, 1.0)
        for doc, s in ranking:
            scaled = (s - lo) / (hi - lo) if hi > lo else 1.0
            fused[doc] = fused.get(doc, 0.0) + weight * scaled
    return sorted(fused.items(), key=lambda item: -item[1])


@dataclass(frozen=True, slots=True)
class Filter:
    """Restricts hits: path prefix or glob, module prefix, and kinds."""

    path: str | None = None
    module: str | None = None
    kinds: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.path or self.module or self.kinds)

    def sql(self) -> tuple[str, list[object]]:
        clauses: list[str] = []
        params: list[object] = []
        if self.path:
            if any(ch in self.path for ch in "*?["):
                clauses.append("path GLOB ?")
                params.append(self.path)
            else:
                clauses.append("starts_with(path, ?)")
                params.append(self.path)
        if self.module:
            clauses.append("(module = ? OR starts_with(module, ?))")
            params += [self.module, self.module.rstrip("/") + "/"]
        if self.kinds:
            clauses.append(f"kind IN ({', '.join('?' for _ in self.kinds)})")
            params += list(self.kinds)
        return " AND ".join(clauses) or "true", params


KINDS: tuple[str, ...] = get_args(ChunkKind)


class Searcher:
    """Holds the vectors in memory so that repeated queries pay only for the query."""

    def __init__(self, store: Store, embedder: Embedder, fusion: Fusion | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.fusion = fusion or Fusion()
        # (ids, matrix) as one tuple, swapped in one assignment: a daemon reloads while
        # other threads search, and they must never pair new ids with an old matrix.
        self._snapshot: tuple[np.ndarray, np.ndarray] | None = None

    def reload(self) -> None:
        self._snapshot = self.store.vectors()

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        snapshot = self._snapshot
        if snapshot is None:
            self.reload()
            snapshot = self._snapshot
        assert snapshot is not None
        if snapshot[0].shape[0] == 0:
            raise IndexEmptyError("the index holds no chunks; run `gleambrctl index PATH` first")
        return snapshot

    def dense(self, query: str, depth: int, where: Filter = Filter()) -> list[tuple[int, float]]:
        return self.dense_by_vector(self.embedder.embed_batch([query])[0], depth, where)

    def dense_by_vector(
        self, vector: np.ndarray, depth: int, where: Filter = Filter()
    ) -> list[tuple[int, float]]:
        ids, matrix = self._vectors()
        if where:
            allowed = np.isin(ids, np.asarray(self.store.ids_where(*where.sql()), dtype=ids.dtype))
            rows = np.flatnonzero(allowed)
            idx, scores = top_k_cosine(matrix[rows], vector, depth)
            return [(int(ids[rows[i]]), float(s)) for i, s in zip(idx, scores, strict=True)]
        idx, scores = top_k_cosine(matrix, vector, depth)
        return [(int(ids[i]), float(s)) for i, s in zip(idx, scores, strict=True)]

    def bm25(self, query: str, depth: int, where: Filter = Filter()) -> list[tuple[int, float]]:
        self._vectors()
        return self.store.bm25(code_words(query), depth, *where.sql())

    def ranked_ids(
        self, query: str, mode: Mode, where: Filter = Filter(), depth: int | None = None
    ) -> list[tuple[int, float]]:
        depth = depth or self.fusion.depth
        if mode == "dense":
            return self.dense(query, depth, where)
        if mode == "bm25":
            return self.bm25(query, depth, where)
        if mode == "hybrid":
            rankings = {
                "dense": self.dense(query, depth, where),
                "bm25": self.bm25(query, depth, where),
            }
            return self.fusion.fuse(query, rankings)
        raise ConfigError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")

    def search(
        self, query: str, k: int = 10, mode: Mode = "hybrid", where: Filter = Filter()
    ) -> list[Hit]:
        if k < 1:
            raise ConfigError("-k must be at least 1")
        if not query.strip():
            raise ConfigError("the query is empty; pass some words or an identifier")
        # Parts of split nodes collapse into one hit, so ask for more than k.
        ranked = self.ranked_ids(query, mode, where, depth=max(self.fusion.depth, k * 3))
        return self.collapse(ranked, k)

    def collapse(self, ranked: list[tuple[int, float]], k: int) -> list[Hit]:
        """One hit per node: the parts of a split function merge into their best-scored one."""
        rows = self.store.chunk_rows([doc for doc, _ in ranked])
        hits: list[Hit] = []
        seen: set[tuple[str, str, str]] = set()
        for doc, score in ranked:
            row = rows.get(doc)
            if row is None:
                continue
            key = (row["path"], row["kind"], row["name"])
            if key in seen:
                continue
            seen.add(key)
            start, end, text = row["start_line"], row["end_line"], row["text"]
            if row["parts"] > 1:
                parts = self.store.node_parts(row["path"], row["kind"], row["name"])
                if len(parts) == row["parts"]:
                    start, end = parts[0]["start_line"], parts[-1]["end_line"]
                    text = "\n".join(p["text"] for p in parts)
            hits.append(
                Hit(
                    rank=len(hits) + 1,
                    path=row["path"],
                    module=row["module"],
                    name=row["name"],
                    kind=row["kind"],
                    start_line=start,
                    end_line=end,
                    score=score,
                    text=text,
                    signature=row["signature"],
                    doc=row["doc"] or "",
                )
            )
            if len(hits) == k:
                break
        return hits


def search_json(query: str, mode: str, hits: Sequence[Hit]) -> dict[str, Any]:
    """The `search --json` object, which the daemon and the MCP tool return as well."""
    return {"query": query, "mode": mode, "results": [h.as_dict() for h in hits]}
