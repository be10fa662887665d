"""Hybrid retrieval: dense cosine and BM25 rankings fused with Reciprocal Rank Fusion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from gbr.core.chunk_text import code_words
from gbr.core.embedder import Embedder
from gbr.core.errors import ConfigError, IndexEmptyError
from gbr.core.records import Hit
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


class Searcher:
    """Holds the vectors in memory so that repeated queries pay only for the query."""

    def __init__(self, store: Store, embedder: Embedder, candidates: int = 50) -> None:
        self.store = store
        self.embedder = embedder
        self.candidates = candidates
        self._ids: np.ndarray | None = None
        self._matrix: np.ndarray | None = None

    def reload(self) -> None:
        self._ids, self._matrix = self.store.vectors()

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids is None or self._matrix is None:
            self.reload()
        assert self._ids is not None and self._matrix is not None
        if self._ids.shape[0] == 0:
            raise IndexEmptyError("the index holds no chunks; run `gleambrctl index PATH` first")
        return self._ids, self._matrix

    def dense_ranking(self, query: str, depth: int) -> list[int]:
        ids, matrix = self._vectors()
        vector = self.embedder.embed_batch([query])[0]
        idx, _ = top_k_cosine(matrix, vector, depth)
        return [int(ids[i]) for i in idx]

    def bm25_ranking(self, query: str, depth: int) -> list[int]:
        self._vectors()
        return [doc for doc, _ in self.store.bm25(code_words(query), depth)]

    def ranked_ids(self, query: str, mode: Mode, depth: int) -> list[tuple[int, float]]:
        if mode == "dense":
            ids, matrix = self._vectors()
            vector = self.embedder.embed_batch([query])[0]
            idx, scores = top_k_cosine(matrix, vector, depth)
            return [(int(ids[i]), float(s)) for i, s in zip(idx, scores, strict=True)]
        if mode == "bm25":
            self._vectors()
            return self.store.bm25(code_words(query), depth)
        if mode == "hybrid":
            return rrf(
                {
                    "dense": self.dense_ranking(query, depth),
                    "bm25": self.bm25_ranking(query, depth),
                }
            )
        raise ConfigError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")

    def search(self, query: str, k: int = 10, mode: Mode = "hybrid") -> list[Hit]:
        if k < 1:
            raise ConfigError("-k must be at least 1")
        if not query.strip():
            raise ConfigError("the query is empty; pass some words or an identifier")
        depth = max(self.candidates, k * 5)
        ranked = self.ranked_ids(query, mode, depth)
        return self._collapse(ranked, k)

    def _collapse(self, ranked: list[tuple[int, float]], k: int) -> list[Hit]:
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
