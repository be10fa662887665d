"""The learned ranking stage: a linear model over cheap features of the top candidates.

Why: on real code the right definition is usually retrieved but not first (issue 10: R@20
0.93, R@1 0.61). What separates it from its neighbours is cheap to see once query and hit
sit side by side: the query's words in the name, signature or doc, the kind of chunk the
question asks for, where the file lives, how the dense and BM25 lists agreed. A linear
model over those features, trained offline on the dev half of the devcorpus by
bench/experiments/train_ranker.py and shipped as plain weights in gbr/core/data/ranker.json,
reorders the top ~30 in well under a millisecond per hit, with nothing downloaded and no new
dependency. It only reorders: the hits it returns are the ones it was given.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gbr.core.errors import ConfigError
from gbr.core.parse.chunk_text import code_words
from gbr.core.paths import DATA_DIR
from gbr.core.rank.priors import Intent, TestPolicy, is_example, is_test

DEFAULT_RANKER_PATH = DATA_DIR / "ranker.json"
# Issue 29: the combination of these features and the second model's, learned on the silver
# train split (bench/experiments/train_silver_ranker.py); see docs/decisions/0009.
SILVER_RANKER_PATH = DATA_DIR / "ranker-silver.json"

_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "gets",
        "give",
        "given",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "one",
        "or",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "up",
        "use",
        "used",
        "using",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "with",
        "without",
        "you",
        "your",
        "we",
        "our",
        "out",
        "all",
        "any",
        "some",
        "way",
        "want",
        "need",
        "should",
        "would",
        "could",
    ]
)
_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    """A crude suffix strip, enough to meet `parses` with `parse` and `decoding` with `decode`."""
    for suffix in ("ing", "ies", "es", "ed", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> frozenset[str]:
    """The stemmed content words of a text, identifiers split (`map_loop` gives map, loop)."""
    return frozenset(_stem(w) for w in _WORD.findall(code_words(text)) if w not in _STOP)


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the features read about one hit: its chunk row and how retrieval saw it."""

    path: str
    module: str
    name: str
    kind: str
    visibility: str
    signature: str
    doc: str
    lines: int
    text: str
    fused: float  # after priors
    fused_rank: int  # from 1
    dense: float | None = None  # cosine, None when not in the dense list
    dense_rank: int | None = None
    bm25: float | None = None
    bm25_rank: int | None = None


FEATURES: tuple[str, ...] = (
    "fused_norm",
    "fused_rrank",
    "dense",
    "dense_gap",
    "dense_rrank",
    "bm25_norm",
    "bm25_rrank",
    "name_overlap",
    "name_covered",
    "name_exact",
    "sig_overlap",
    "doc_overlap",
    "module_overlap",
    "text_overlap",
    "kind_function",
    "kind_type",
    "kind_constant",
    "kind_module",
    "type_q_type",
    "howto_module",
    "howto_function",
    "ident_exact",
    "test",
    "example",
    "private",
    "log_lines",
    "has_doc",
    # Issue 29: the learned combination reads what the shipped half-and-half mix reads (both
    # scores scaled over the pool), so that mix is one of the weightings it can learn.
    "fused_span",
    "second_span",
    "second_gap",
    "second_rrank",
)
SECOND_FEATURES = frozenset(f for f in FEATURES if f.startswith("second_"))
_OF_ONE_HIT = FEATURES.index("fused_span")  # the columns before it read one hit alone


def features(
    query: str,
    intent: Intent,
    tests: TestPolicy,
    pool: Sequence[Candidate],
    second: np.ndarray | None = None,
) -> np.ndarray:
    """One row of FEATURES per candidate. Scores are read relative to the pool's best, so
    the model does not depend on the scale of a fusion or of a corpus's BM25. `second` is
    the second model's cosine of each candidate; without it its columns are 0."""
    q = terms(query)
    q_idents = {w.strip("`'\"?,.():").lower() for w in query.split()}
    top_fused = max((c.fused for c in pool), default=0.0) or 1.0
    top_dense = max((c.dense for c in pool if c.dense is not None), default=0.0)
    top_bm25 = max((c.bm25 for c in pool if c.bm25 is not None), default=0.0) or 1.0
    demote = 1.0 if tests == "demote" else 0.0
    rows = np.zeros((len(pool), len(FEATURES)), dtype=np.float64)
    for i, c in enumerate(pool):
        name_terms = terms(c.name)
        is_type = c.kind in ("type", "type_alias", "external_type")
        exact = 1.0 if c.name.lower() in q_idents else 0.0
        rows[i, :_OF_ONE_HIT] = (
            c.fused / top_fused,
            1.0 / c.fused_rank,
            c.dense or 0.0,
            (c.dense - top_dense) if c.dense is not None else -1.0,
            1.0 / c.dense_rank if c.dense_rank else 0.0,
            (c.bm25 or 0.0) / top_bm25,
            1.0 / c.bm25_rank if c.bm25_rank else 0.0,
            _overlap(q, name_terms),
            _overlap(name_terms, q),
            exact,
            _overlap(q, terms(c.signature)),
            _overlap(q, terms(c.doc)),
            _overlap(q, terms(c.module)),
            _overlap(q, terms(c.text)),
            1.0 if c.kind == "function" else 0.0,
            1.0 if is_type else 0.0,
            1.0 if c.kind == "constant" else 0.0,
            1.0 if c.kind == "module" else 0.0,
            1.0 if intent == "type" and is_type else 0.0,
            1.0 if intent == "howto" and c.kind == "module" else 0.0,
            1.0 if intent == "howto" and c.kind == "function" else 0.0,
            exact if intent == "identifier" else 0.0,
            demote if is_test(c.path, c.name) else 0.0,
            demote if is_example(c.path) else 0.0,
            1.0 if c.visibility == "private" else 0.0,
            math.log1p(max(c.lines, 1)),
            1.0 if c.doc.strip() else 0.0,
        )
    if len(pool):
        col = FEATURES.index
        rows[:, col("fused_span")] = min_max(np.array([c.fused for c in pool], dtype=np.float64))
        if second is not None:
            cos = np.asarray(second, dtype=np.float64)
            rank = np.empty(len(cos))
            rank[np.argsort(-cos, kind="stable")] = np.arange(1, len(cos) + 1)
            rows[:, col("second_span")] = min_max(cos)
            rows[:, col("second_gap")] = cos - cos.max()
            rows[:, col("second_rrank")] = 1.0 / rank
    return rows


def min_max(values: np.ndarray) -> np.ndarray:
    """Each value's place between the lowest (0) and the highest (1); all 0 when equal."""
    width = float(values.max() - values.min())
    return (values - values.min()) / width if width > 0 else np.zeros_like(values)


def _overlap(wanted: frozenset[str], found: frozenset[str]) -> float:
    """Share of `wanted` present in `found`."""
    return len(wanted & found) / len(wanted) if wanted else 0.0


@dataclass(frozen=True)
class LinearRanker:
    """score = weights . (x - mean) / std over the `columns` it was trained on (a file from
    before a feature was added keeps loading); higher is better. Loaded from plain JSON."""

    weights: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    name: str = "linear"
    columns: tuple[str, ...] = FEATURES

    @property
    def reads_second(self) -> bool:
        """Whether it weighs the second model's scores: then it replaces the fixed mix."""
        return any(
            w != 0 for f, w in zip(self.columns, self.weights, strict=True) if f in SECOND_FEATURES
        )

    @functools.cached_property
    def _picked(self) -> list[int]:
        """Where its columns sit among FEATURES, worked out once per loaded ranker."""
        return [FEATURES.index(f) for f in self.columns]

    def scores(self, x: np.ndarray) -> np.ndarray:
        """`x` has every column of FEATURES, as `features` makes it."""
        picked = x[:, self._picked]
        scored: np.ndarray = ((picked - self.mean) / self.std) @ self.weights
        return scored

    def order(self, x: np.ndarray) -> list[int]:
        """Candidate indices best first; ties keep the input order (stable), so the result
        is the same on every run."""
        s = self.scores(x)
        return sorted(range(len(s)), key=lambda i: -s[i])

    def as_json(self, **extra: object) -> dict[str, object]:
        return {
            "format": "gbr-linear-ranker/1",
            "features": list(self.columns),
            "weights": [round(float(w), 6) for w in self.weights],
            "mean": [round(float(m), 6) for m in self.mean],
            "std": [round(float(s), 6) for s in self.std],
            **extra,
        }


def ranker_from_json(data: dict[str, object], source: str) -> LinearRanker:
    fix = "re-run bench/experiments/train_ranker.py, or turn the ranker off"
    if data.get("format") != "gbr-linear-ranker/1":
        raise ConfigError(f"{source} is not a gbr ranker file; {fix}")
    columns = data.get("features")
    if not isinstance(columns, list) or not set(columns) <= set(FEATURES):
        raise ConfigError(f"{source} was trained on other features than this gbr reads; {fix}")
    arrays = [np.asarray(data[key], dtype=np.float64) for key in ("weights", "mean", "std")]
    if any(a.shape != (len(columns),) or not np.all(np.isfinite(a)) for a in arrays):
        raise ConfigError(f"{source} holds malformed weights; {fix}")
    weights, mean, std = arrays
    return LinearRanker(
        weights, mean, np.where(std > 0, std, 1.0), name=f"linear:{source}", columns=tuple(columns)
    )


@functools.cache
def load_ranker(path: Path = DEFAULT_RANKER_PATH) -> LinearRanker:
    """The ranker in `path` (the shipped one by default), read once per process."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the ranker file {path}: {exc}; reinstall gbr") from exc
    return ranker_from_json(data, Path(path).name)
