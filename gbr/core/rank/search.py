"""Hybrid retrieval: dense cosine and BM25 rankings, fused.

Two fusions are offered: Reciprocal Rank Fusion and a convex combination of normalised
scores. The default is whichever scored best on our eval sets (see bench/eval.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from gbr.core.embed.embedder import Embedder
from gbr.core.embed.model_files import same_vector_space
from gbr.core.environ import NO_ENV, RANKER, is_off
from gbr.core.errors import ConfigError, IndexEmptyError, ModelMismatchError
from gbr.core.parse.chunk_text import code_words
from gbr.core.rank.priors import (
    NO_PRIORS,
    Intent,
    NamedQuery,
    Priors,
    effective_policy,
    graph_centrality,
    holds_phrase,
    literal_phrase,
)
from gbr.core.rank.ranker import (
    DEFAULT_RANKER_PATH,
    Candidate,
    LinearRanker,
    features,
    load_ranker,
    min_max,
)
from gbr.core.records import (
    MODES,
    NO_FILTER,
    ChunkKind,
    ChunkRow,
    Hit,
    Mode,
    NodePart,
    SearchFilter,
)
from gbr.core.store.postings_memory import MemoryPostings

if TYPE_CHECKING:
    from gbr.core.rank.second_opinion import SecondOpinion
    from gbr.core.store.rows_memory import MemoryRows
from gbr.core.store.facade import Store
from gbr.core.telemetry import log

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


# (chunk ids, unit vectors) of one index state, row for row.
Snapshot = tuple[np.ndarray, np.ndarray]


def scan(
    snapshot: Snapshot, vector: np.ndarray, depth: int, rows: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """(chunk id, cosine) of the `depth` rows (of `rows`, when given) nearest the query."""
    ids, matrix = snapshot
    if rows is None:
        idx, scores = top_k_cosine(matrix, vector, depth)
        return [(int(ids[i]), float(s)) for i, s in zip(idx, scores, strict=True)]
    idx, scores = top_k_cosine(matrix[rows], vector, depth)
    return [(int(ids[rows[i]]), float(s)) for i, s in zip(idx, scores, strict=True)]


_POOL: futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _workers() -> futures.ThreadPoolExecutor:
    """Threads for the dense half of hybrid queries, made on first use (a daemon's
    request threads share them)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="gbr-dense")
        return _POOL


_CODE_TOKEN = re.compile(
    r"[a-z0-9]+_[a-z0-9_]+"  # snake_case
    r"|[a-z]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*"  # PascalCase with two humps
    r"|[a-z_][a-z0-9_]*\.[a-z_][A-Za-z0-9_]*"  # module.fn
    r"|[a-z_]+/[a-z_/]+"  # gleam/list
)


def worth_a_second(query: str, hits: Sequence[Hit]) -> bool:
    """The second opinion is for questions in words. An identifier, or a message the code
    holds verbatim (pasted from a terminal, quoted or not), is matched exactly by the first
    stage (BM25 and the literal prior), and mixing in a model's sense of the words only
    blurs it."""
    if looks_like_code(query):
        return False
    phrase = literal_phrase(query)
    return not any(holds_phrase(phrase, hit.text) for hit in hits)


def looks_like_code(query: str) -> bool:
    """True when the query names an identifier (`map_loop`, `list.map`, `LoanError`)."""
    words = query.split()
    if any(_CODE_TOKEN.fullmatch(w.strip("`'\"?,():")) for w in words):
        return True
    return len(words) == 1 and bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[0]))


FusionMethod = Literal["cc", "rrf"]
# How the convex combination scales each list's scores before mixing them (see `scaled`).
Norm = Literal["minmax", "z", "max"]


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
    norm: Norm = "minmax"

    def weights(self, query: str) -> dict[str, float]:
        alpha = self.code_alpha if looks_like_code(query) else self.alpha
        return {"dense": alpha, "bm25": 1.0 - alpha}

    def fuse(self, query: str, rankings: Mapping[str, Sequence[tuple[int, float]]]) -> Ranked:
        weights = self.weights(query)
        if self.method == "rrf":
            ids = {name: [doc for doc, _ in ranking] for name, ranking in rankings.items()}
            return rrf(ids, k=self.rrf_k, weights=weights)
        return convex(rankings, weights, self.norm)


Ranked = list[tuple[int, float]]


def convex(
    rankings: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float],
    norm: Norm = "minmax",
) -> Ranked:
    """Sum of weight x score, each list's scores scaled by `norm` (absent = 0).

    Unlike RRF it keeps how far apart the scores are, so a clear dense winner is not
    dragged down by a noisy BM25 list. A one-item list scales its item to 1.
    """
    fused: dict[int, float] = {}
    for name, ranking in rankings.items():
        if not ranking:
            continue
        weight = weights.get(name, 1.0)
        values = scaled([s for _, s in ranking], norm)
        for (doc, _), value in zip(ranking, values, strict=True):
            fused[doc] = fused.get(doc, 0.0) + weight * value
    return sorted(fused.items(), key=lambda item: -item[1])


def scaled(scores: Sequence[float], norm: Norm) -> list[float]:
    """One list's scores on a common scale: `minmax` to [0, 1] (the last of the list is 0,
    however close it is to the first), `max` as a share of the best (a long flat list stays
    high, a steep one falls), `z` in standard deviations above the list's mean, floored at
    0 so that a missing document and a poor one count alike."""
    hi, lo = max(scores), min(scores)
    if norm == "max":
        return [s / hi if hi > 0 else 1.0 for s in scores]
    if norm == "z":
        mean = sum(scores) / len(scores)
        sd = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
        return [max(0.0, (s - mean) / sd) if sd > 0 else 1.0 for s in scores]
    return [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]


# The name the front doors use for the filter record (gbr.core.records.SearchFilter).
Filter = SearchFilter


KINDS: tuple[str, ...] = get_args(ChunkKind)


@dataclass(frozen=True, slots=True)
class Ranking:
    """What happens after fusion: priors on the fused scores, then the learned ranker over
    the top `pool` hits (hybrid mode only: it was trained on both lists' scores)."""

    priors: Priors = field(default_factory=Priors)
    ranker: LinearRanker | None = None
    pool: int = 30
    second: SecondOpinion | None = None  # re-scores the top `pool` last (hybrid mode)

    @classmethod
    def default(cls, env: Mapping[str, str] = NO_ENV) -> Ranking:
        """The shipped defaults (chosen on the devcorpus dev half, see bench/eval.py); the
        learned ranker is off unless GBR_RANKER in `env` says `on` (the shipped file) or
        names one. The second opinion is on unless GBR_SECOND_OPINION in `env` says off;
        a library caller passing no environment gets it too, without a shared cache."""
        from gbr.core.rank.second_opinion import default_second_opinion

        second = default_second_opinion(env)
        setting = env.get(RANKER_ENV, "").strip()
        if not setting or is_off(setting):
            return cls(priors=DEFAULT_PRIORS, second=second)
        path = DEFAULT_RANKER_PATH if setting.lower() == "on" else Path(setting).expanduser()
        return cls(priors=DEFAULT_PRIORS, ranker=load_ranker(path), second=second)


# Chosen on the dev half of the devcorpus (bench/eval.py --devcorpus --half dev): tests
# and examples at 0.3 gave +0.021 R@5 and +0.036 MRR@10 per package; private x0.85 and
# module chunks x0.6 for how-to questions did not help and stay off (1.0). Round two, from
# the dev-half misses: code holding the query's words verbatim x2 (x4 since decision 0013:
# the silver-tuned model pulls a pasted message towards functions named like its words
# harder than x2 outweighs), type chunks x0.7 for how-to questions, shape questions
# ("either A or B", "what does it contain") read as type questions and type chunks x1.6
# for them: 0.914/0.750 -> 0.930/0.791 (examples/ 0.909/0.770
# -> 0.926/0.788). The code graph's centrality (issue 13: `central`, by callers or PageRank,
# x1.05..x1.7) did not help on the dev half (R@5 0.930 at best, MRR@10 0.791 -> 0.789 at
# best, R@1 down) and stays off (1.0).
# Issue 30: a query that is a definition's name, or asks what one is, puts it first
# (`names_first`; see the README's figures for what it changed on the eval sets).
DEFAULT_PRIORS = Priors(
    tests="demote",
    aside=0.3,
    type_lean=1.6,
    howto_type=0.7,
    literal=4.0,
    wide_types=True,
    names_first=True,
)
# The learned ranker is off by default: leave-one-repository-out on the dev half gave only
# +0.015 MRR@10 (worse on 3 of 7 repositories), and the held-out half lost 0.04 R@5 with it.
RANKER_ENV = RANKER.name

NO_RANKING = Ranking(priors=NO_PRIORS, ranker=None)


@dataclass(frozen=True, slots=True)
class Retrieval:
    """Fused ids with scores, best first, and each list's own scores and ranks by id."""

    fused: list[tuple[int, float]]
    dense: dict[int, tuple[float, int]] = field(default_factory=dict)
    bm25: dict[int, tuple[float, int]] = field(default_factory=dict)


def _by_id(ranking: Sequence[tuple[int, float]]) -> dict[int, tuple[float, int]]:
    return {doc: (score, rank) for rank, (doc, score) in enumerate(ranking, start=1)}


class Searcher:
    """Holds the vectors in memory so that repeated queries pay only for the query."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        fusion: Fusion | None = None,
        ranking: Ranking | None = None,
        vector_file: Path | None = None,
        postings_budget: int = 0,
        write_vector_file: bool = True,
    ) -> None:
        """`vector_file`: where the index's vectors are memory-mapped from (and written to
        when it is missing or stale, gbr.core.store.vector_file, unless `write_vector_file` is
        off); None reads them into memory.
        `postings_budget`: bytes this searcher may spend holding the BM25 postings in
        memory (gbr.core.store.postings_memory) and, with what they leave, the chunk rows
        (gbr.core.store.rows_memory), for one that answers many queries, such as the daemon's;
        0 asks DuckDB each time, as a one-query command should."""
        self.store = store
        self.vector_file = vector_file
        self.write_vector_file = write_vector_file
        self.embedder = embedder
        self.fusion = fusion or Fusion()
        self.ranking = ranking if ranking is not None else Ranking.default()
        # (ids, matrix) as one tuple, swapped in one assignment: a daemon reloads while
        # other threads search, and they must never pair new ids with an old matrix.
        self._snapshot: tuple[np.ndarray, np.ndarray] | None = None
        # (chunks with a vector, all chunks), read with the snapshot: while an index run
        # still embeds, dense search sees only the first, and BM25 all of them.
        self._coverage = (0, 0)
        self._central: dict[str, dict[tuple[str, str], float]] = {}
        self.postings_budget = postings_budget
        self._postings: MemoryPostings | None = None
        self._rows: MemoryRows | None = None
        self._postings_ready = threading.Event()
        self._postings_lock = threading.Lock()
        # The load in progress: its ready event, its connection and its thread.
        self._loading: tuple[threading.Event, Store, threading.Thread] | None = None
        # The model the snapshot's vectors come from, read from the index's meta at the
        # first query that embeds after each reload (None until read).
        self._index_model: tuple[str | None] | None = None

    def reload(self) -> None:
        snapshot = self.store.vectors(self.vector_file, self.write_vector_file)
        # The snapshot holds exactly the chunks that have a vector, so only the total is
        # asked: counting the vectors themselves read the whole column (2 GB, 2-5 s at 1M).
        self._coverage = (int(snapshot[0].shape[0]), self.store.chunk_count())
        self._index_model = None
        self._snapshot = snapshot
        self._central = {}  # read again, once, for the new snapshot
        if self.postings_budget > 0:
            self._load_postings_behind()

    def _load_postings_behind(self) -> None:
        """Read the new state's postings and chunk rows on a thread of their own: until they
        are in, BM25 and row reads ask DuckDB, so no query waits for them and none is
        answered from an older state.

        The thread is not a daemon thread: one killed inside DuckDB at exit aborts the
        process. `close` interrupts it instead, and an earlier load is interrupted by the
        next one."""
        self._stop_loading()
        ready = threading.Event()
        cursor = self.store.cursor()

        def load() -> None:
            loaded: MemoryPostings | None = None
            rows: MemoryRows | None = None
            try:
                loaded = cursor.memory_postings(self.postings_budget)
                left = self.postings_budget - (loaded.nbytes if loaded is not None else 0)
                rows = cursor.memory_rows(left)
            except Exception as exc:  # interrupted, or a store closed: DuckDB answers
                log().info(
                    "postings_not_in_memory" if loaded is None else "rows_not_in_memory",
                    error=str(exc)[:300],
                )
            finally:
                cursor.close()
            with self._postings_lock:
                if self._loading is not None and self._loading[0] is ready:
                    # No later reload replaced this one.
                    self._postings, self._rows = loaded, rows
            ready.set()

        thread = threading.Thread(target=load, name="gbr-postings")
        with self._postings_lock:
            self._postings = self._rows = None
            self._postings_ready = ready
            self._loading = (ready, cursor, thread)
        thread.start()

    def _stop_loading(self, timeout: float = 10.0) -> None:
        with self._postings_lock:
            loading, self._loading = self._loading, None
        if loading is None:
            return
        ready, cursor, thread = loading
        if not ready.is_set():
            cursor.interrupt()
        thread.join(timeout)

    def close(self) -> None:
        """Stop reading postings in the background; call before closing the store."""
        self._stop_loading()

    def postings_in_memory(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the postings of the current state; whether they
        are in memory now (False also when they are over the budget)."""
        self._vectors()
        self._postings_ready.wait(timeout)
        return self._postings is not None

    def centrality(self, by: str = "callers") -> dict[tuple[str, str], float]:
        """The code graph's centrality of each definition, read once per index snapshot."""
        central = self._central.get(by)
        if central is None:
            # Here, not at the top: the graph's reader brings the prompt and LLM modules,
            # which a search that ranks without centrality never uses.
            from gbr.core.graph.store import GraphReader

            edges = GraphReader(self.store).reference_edges()
            central = self._central[by] = graph_centrality(edges, by)
        return central

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        snapshot = self._snapshot
        if snapshot is None:
            self.reload()
            snapshot = self._snapshot
        assert snapshot is not None
        if snapshot[0].shape[0] == 0 and self._coverage[1] == 0:
            raise IndexEmptyError("the index holds no chunks; run `gleambrctl index PATH` first")
        return snapshot

    def _vectors_model(self) -> str | None:
        """The model id the index records for its vectors; read on the store's thread."""
        if self._index_model is None:
            self._index_model = (self.store.meta().get("model_id"),)
        return self._index_model[0]

    def _same_model(self, index_model: str | None) -> None:
        """Refuse to compare the index's vectors with a query embedded by another model
        (a --model-dir or GBR_MODEL_DIR set after `index`): the scores would mean nothing,
        and in hybrid mode BM25 would hide it. Asked where the query is embedded, since
        the model's id is known once it is loaded, and a cold search loads it on the
        worker while DuckDB answers BM25."""
        query_model = self.embedder.model_id
        if not same_vector_space(index_model, query_model):
            raise ModelMismatchError(
                f"the index {self.store.path} was embedded by model {index_model!r}, "
                f"but this search embeds with {query_model!r}; re-run `gleambrctl index` on "
                "the package to re-embed it with this model, point --model-dir (or "
                "GBR_MODEL_DIR) at the index's model, or search with --mode bm25"
            )

    def coverage(self) -> tuple[int, int]:
        """(chunks with a vector, all chunks) in the snapshot searched."""
        self._vectors()
        return self._coverage

    def dense(
        self, query: str, depth: int, where: SearchFilter = NO_FILTER
    ) -> list[tuple[int, float]]:
        snapshot = self._vectors()
        if snapshot[0].shape[0] == 0:
            return []  # nothing embedded yet: the query need not be either
        rows = self._rows_allowed(snapshot, where)
        return self._embed_and_scan(query, snapshot, depth, rows, self._vectors_model())

    def dense_by_vector(
        self, vector: np.ndarray, depth: int, where: SearchFilter = NO_FILTER
    ) -> list[tuple[int, float]]:
        snapshot = self._vectors()
        self._same_model(self._vectors_model())
        return scan(snapshot, vector, depth, self._rows_allowed(snapshot, where))

    def _rows_allowed(self, snapshot: Snapshot, where: SearchFilter) -> np.ndarray | None:
        """The snapshot's rows the filter lets through (None: all of them)."""
        if not where:
            return None
        ids = snapshot[0]
        allowed = np.isin(ids, np.asarray(self.store.ids_matching(where), dtype=ids.dtype))
        return np.flatnonzero(allowed)

    def _embed_and_scan(
        self,
        query: str,
        snapshot: Snapshot,
        depth: int,
        rows: np.ndarray | None,
        index_model: str | None,
    ) -> list[tuple[int, float]]:
        """The dense list from the model and the vectors alone: it never touches the store,
        so it may run on another thread while this one asks DuckDB for BM25."""
        self._same_model(index_model)
        return scan(snapshot, self.embedder.embed_batch([query])[0], depth, rows)

    def bm25(
        self, query: str, depth: int, where: SearchFilter = NO_FILTER
    ) -> list[tuple[int, float]]:
        self._vectors()
        held = self._postings
        # Held postings answer only for the state they were read from: a daemon's pass
        # updates the full-text index before its searcher reloads, and DuckDB answers then.
        if held is not None and not where and self.store.fulltext_state() == held.state:
            return held.top(self.store.query_terms(code_words(query)), depth)
        return self.store.bm25(code_words(query), depth, where)

    def retrieve(
        self, query: str, mode: Mode, where: SearchFilter = NO_FILTER, depth: int | None = None
    ) -> Retrieval:
        """The first stage: one list, or both fused, with each list's scores kept for the
        ranking stage."""
        depth = depth or self.fusion.depth
        if mode == "dense":
            dense = self.dense(query, depth, where)
            return Retrieval(dense, dense=_by_id(dense))
        if mode == "bm25":
            bm25 = self.bm25(query, depth, where)
            return Retrieval(bm25, bm25=_by_id(bm25))
        if mode == "hybrid":
            dense, bm25 = self._both(query, depth, where)
            fused = self.fusion.fuse(query, {"dense": dense, "bm25": bm25})
            return Retrieval(fused, _by_id(dense), _by_id(bm25))
        raise ConfigError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")

    def _both(
        self, query: str, depth: int, where: SearchFilter
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The dense and BM25 lists at once: the model and the vector scan run on a worker
        thread while DuckDB scores BM25 here (both leave the GIL), so a hybrid query waits
        for the slower of the two rather than their sum. Everything that reads the store
        (a reload, the filter's ids) is done first, on this thread."""
        snapshot = self._vectors()
        if snapshot[0].shape[0] == 0:
            return [], self.bm25(query, depth, where)
        rows = self._rows_allowed(snapshot, where)
        model = self._vectors_model()
        job = _workers().submit(self._embed_and_scan, query, snapshot, depth, rows, model)
        try:
            bm25 = self.bm25(query, depth, where)
        finally:
            futures.wait([job])
        return job.result(), bm25

    def ranked_ids(
        self, query: str, mode: Mode, where: SearchFilter = NO_FILTER, depth: int | None = None
    ) -> list[tuple[int, float]]:
        return self.retrieve(query, mode, where, depth).fused

    def search(
        self, query: str, k: int = 10, mode: Mode = "hybrid", where: SearchFilter = NO_FILTER
    ) -> list[Hit]:
        if k < 1:
            raise ConfigError("-k must be at least 1")
        if not query.strip():
            raise ConfigError("the query is empty; pass some words or an identifier")
        # Parts of split nodes collapse into one hit, so ask for more than k.
        depth = max(self.fusion.depth, k * 3, self.ranking.pool)
        retrieval = self.retrieve(query, mode, where, depth=depth)
        return self.finish(query, retrieval, k, where, learned=mode == "hybrid")

    def finish(
        self,
        query: str,
        retrieval: Retrieval,
        k: int,
        where: SearchFilter = NO_FILTER,
        learned: bool = True,
        second_query: str | None = None,
    ) -> list[Hit]:
        """The ranking stage: priors on the fused scores, one hit per node, then the learned
        ranker and the second opinion over the top `pool` (when `learned` and configured);
        k hits. `second_query` is what the second model reads when the words retrieved with
        differ from the question (a chat's follow-up, rewritten); "" skips the second opinion
        (a follow-up joined to its turn: two questions in one, which the model blurs)."""
        ranker = self.ranking.ranker if learned else None
        second = self.ranking.second if learned and second_query != "" else None
        size = max(k, self.ranking.pool)
        wanted = size if ranker is not None or second is not None else k
        named = self.named_ids(query, where)
        intent, found = self.candidates(query, retrieval, wanted, where, named)
        # The named definitions lead the order the later stages make, too.
        first = {(row.path, row.kind, row.name) for _, row, doc in found if doc in named}
        if ranker is not None and ranker.reads_second:
            combined = self.combined(query, intent, retrieval, found[:size], where, second_query)
            if combined is None:  # the second model stands aside: the first order, as shipped
                hits = share_of_best(self._wholes(found[:k]))
            else:
                wholes, x = combined
                scores = min_max(ranker.scores(x))
                order = sorted(range(len(wholes)), key=lambda i: -scores[i])  # stable on ties
                hits = [replace(wholes[i], score=float(scores[i])) for i in order]
            hits = _first_of(hits, first)
            return [replace(hit, rank=n) for n, hit in enumerate(hits[:k], start=1)]
        if ranker is not None and len(found) > 1:
            pool = found[: self.ranking.pool]
            tests = effective_policy(where.tests, query)
            x = features(query, intent, tests, pool_candidates(pool, retrieval))
            scores = ranker.scores(x)
            order = sorted(range(len(pool)), key=lambda i: -scores[i])  # stable on ties
            reordered = [(replace(pool[i][0], score=float(scores[i])), *pool[i][1:]) for i in order]
            found = reordered + found[len(pool) :]
        if second is None or not worth_a_second(query, [hit for hit, _, _ in found[:size]]):
            hits = self._wholes(found[:k])
            if learned and ranker is None:
                hits = share_of_best(hits)
        else:
            hits = second.rerank(second_query or query, self._wholes(found[:size]))
        hits = _first_of(hits, first)
        return [replace(hit, rank=n) for n, hit in enumerate(hits[:k], start=1)]

    def combined(
        self,
        query: str,
        intent: Intent,
        retrieval: Retrieval,
        pool: Sequence[tuple[Hit, ChunkRow, int]],
        where: SearchFilter = NO_FILTER,
        second_query: str | None = None,
    ) -> tuple[list[Hit], np.ndarray] | None:
        """What a learned ranker that weighs the second model reads of `pool`: its whole
        hits and their FEATURES, the second model's cosines among them. None where the
        second opinion would stand aside (off, a query that looks like code, a verbatim
        phrase, "" for `second_query`, a model that cannot run). Training reads pools
        through here too (bench/experiments/train_silver_ranker.py)."""
        second = self.ranking.second if second_query != "" else None
        if second is None or len(pool) < 2 or not worth_a_second(query, [h for h, _, _ in pool]):
            return None
        wholes = self._wholes(pool)
        cosines = second.cosines(second_query or query, wholes)
        if cosines is None:
            return None
        tests = effective_policy(where.tests, query)
        x = features(query, intent, tests, pool_candidates(pool, retrieval), cosines)
        return wholes, x

    def named_ids(self, query: str, where: SearchFilter = NO_FILTER) -> frozenset[int]:
        """The chunks of the definitions the query names, when the names-first stage is on
        (gbr.core.rank.priors.named_in): asked of the index, since a name's own definition
        may lie outside both lists' depth."""
        named = self.ranking.priors.named(query)
        if named is None:
            return frozenset()
        ids = self.store.ids_named(named.name, named.module, where)
        rows = self._chunk_rows(ids)
        # The name as spelled, when something has it: `Timestamp` is the type, not the
        # `timestamp` function beside it; `duration` still finds the type `Duration`.
        spelled = {doc for doc in ids if doc in rows and rows[doc].name == named.name}
        return frozenset(spelled or ids)

    def candidates(
        self,
        query: str,
        retrieval: Retrieval,
        size: int,
        where: SearchFilter = NO_FILTER,
        named: frozenset[int] | None = None,
    ) -> tuple[Intent, list[tuple[Hit, ChunkRow, int]]]:
        """The query's intent and its top `size` nodes after priors, as (hit, row, id); the
        `named` chunks (see named_ids) first, the query's own spelling of the name first."""
        if named is None:
            named = self.named_ids(query, where)
        ranked = retrieval.fused
        have = {doc for doc, _ in ranked}
        ranked = ranked + [(doc, 0.0) for doc in sorted(named) if doc not in have]
        rows = self._chunk_rows([doc for doc, _ in ranked])
        priors = self.ranking.priors.with_tests(effective_policy(where.tests, query))
        intent = priors.intent(query, looks_like_code(query))
        central = self.centrality(priors.central_by) if priors.central != 1.0 else {}
        scored = _with_priors(ranked, rows, priors, intent, literal_phrase(query), central)
        if named:
            scored = _named_first(scored, rows, named, priors.named(query))
        return intent, self._collapse(scored, rows, size)

    def collapse(self, ranked: list[tuple[int, float]], k: int) -> list[Hit]:
        """One hit per node: the parts of a split function merge into their best-scored one."""
        rows = self._chunk_rows([doc for doc, _ in ranked])
        return self._wholes(self._collapse(ranked, rows, k))

    def _chunk_rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of `ids`: from memory when this searcher holds them, else (and for ids
        written since they were read) from DuckDB."""
        held = self._rows
        if held is None:
            return self.store.chunk_rows(ids)
        rows, missing = held.rows(ids)
        if missing:
            rows.update(self.store.chunk_rows(missing))
        return rows

    def _wholes(self, found: Sequence[tuple[Hit, ChunkRow, int]]) -> list[Hit]:
        """The hits, those on one part of a split node widened to the whole node's lines
        and code. Done only for the hits returned, with one query for all their nodes."""
        held = self._rows
        parts: dict[tuple[str, str, str], list[NodePart]] = {}
        split = []
        for _, row, _ in found:
            if row.parts > 1:
                mine = held.parts(row) if held is not None else None
                if mine is None:
                    split.append((row.path, row.kind, row.name))
                else:
                    parts[(row.path, row.kind, row.name)] = mine
        if split:
            parts.update(self.store.nodes_parts(split))
        out = []
        for hit, row, _ in found:
            mine = parts.get((row.path, row.kind, row.name), [])
            if row.parts > 1 and len(mine) == row.parts:
                text = "\n".join(p.text for p in mine)
                hit = replace(
                    hit, start_line=mine[0].start_line, end_line=mine[-1].end_line, text=text
                )
            out.append(hit)
        return out

    def _collapse(
        self, ranked: list[tuple[int, float]], rows: dict[int, ChunkRow], k: int
    ) -> list[tuple[Hit, ChunkRow, int]]:
        """(hit, its best part's row, that row's id), one per node, best first; a split
        node's hit carries its best part's lines until `_wholes` widens it."""
        found: list[tuple[Hit, ChunkRow, int]] = []
        seen: set[tuple[str, str, str]] = set()
        for doc, score in ranked:
            row = rows.get(doc)
            if row is None:
                continue
            key = (row.path, row.kind, row.name)
            if key in seen:
                continue
            seen.add(key)
            hit = Hit(
                rank=len(found) + 1,
                path=row.path,
                module=row.module,
                name=row.name,
                kind=row.kind,
                start_line=row.start_line,
                end_line=row.end_line,
                score=score,
                text=row.text,
                signature=row.signature,
                doc=row.doc,
            )
            found.append((hit, row, doc))
            if len(found) == k:
                break
        return found


def _named_first(
    scored: list[tuple[int, float]],
    rows: Mapping[int, ChunkRow],
    named: frozenset[int],
    spelled: NamedQuery | None,
) -> list[tuple[int, float]]:
    """The `named` chunks ahead of the rest, each group in score order; among the named,
    a definition of the query's own spelling before a constructor's type."""
    lead = [item for item in scored if item[0] in named]
    lead.sort(key=lambda item: spelled is None or rows[item[0]].name != spelled.name)
    return lead + [item for item in scored if item[0] not in named]


def _first_of(hits: Sequence[Hit], first: set[tuple[str, str, str]]) -> list[Hit]:
    """The hits of the `first` nodes, (path, kind, name), ahead of the rest; stable."""
    if not first:
        return list(hits)
    ahead = [h for h in hits if (h.path, h.kind, h.name) in first]
    return ahead + [h for h in hits if (h.path, h.kind, h.name) not in first]


def share_of_best(hits: Sequence[Hit]) -> list[Hit]:
    """Hybrid scores on the 0-1 scale the second opinion's mix has: each as a share of the
    best. The fused mix is 0-1, but the priors multiply it (x2 for code holding the query's
    words, x1.6 for a type asked about), and a hybrid search printed 1.99 for an identifier,
    which the second model does not re-score. Order is kept; only the scale changes."""
    best = max((hit.score for hit in hits), default=0.0)
    if best <= 0:
        return list(hits)
    return [replace(hit, score=hit.score / best) for hit in hits]


def _with_priors(
    ranked: list[tuple[int, float]],
    rows: Mapping[int, ChunkRow],
    priors: Priors,
    intent: Intent,
    phrase: str | None = None,
    central: Mapping[tuple[str, str], float] | None = None,
) -> list[tuple[int, float]]:
    """The fused list with each score times its priors, re-sorted (stable on ties)."""
    out = []
    for doc, score in ranked:
        row = rows.get(doc)
        if row is None:
            continue
        verbatim = priors.literal != 1.0 and holds_phrase(phrase, row.text)
        f = priors.factor(
            intent,
            row.path,
            row.name,
            row.kind,
            row.visibility,
            verbatim,
            (central or {}).get((row.module, row.name), 0.0),
        )
        out.append((doc, score * f))
    return sorted(out, key=lambda item: -item[1])


def pool_candidates(
    pool: Sequence[tuple[Hit, ChunkRow, int]], retrieval: Retrieval
) -> list[Candidate]:
    """What the ranker's features read about each (hit, row, id), in pool order."""
    return [
        _candidate(hit, row, doc, rank, retrieval)
        for rank, (hit, row, doc) in enumerate(pool, start=1)
    ]


def _candidate(hit: Hit, row: ChunkRow, doc: int, rank: int, retrieval: Retrieval) -> Candidate:
    dense = retrieval.dense.get(doc)
    bm25 = retrieval.bm25.get(doc)
    return Candidate(
        path=hit.path,
        module=hit.module,
        name=hit.name,
        kind=hit.kind,
        visibility=row.visibility,
        signature=hit.signature,
        doc=hit.doc,
        lines=hit.end_line - hit.start_line + 1,
        text=hit.text,
        fused=hit.score,
        fused_rank=rank,
        dense=dense[0] if dense else None,
        dense_rank=dense[1] if dense else None,
        bm25=bm25[0] if bm25 else None,
        bm25_rank=bm25[1] if bm25 else None,
    )
