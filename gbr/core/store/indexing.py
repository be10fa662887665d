"""Turning parsed chunks into stored chunks: the texts, the cache keys and the vectors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from gbr.core.embed.embedder import Embedder
from gbr.core.parse.chunk_text import DEFAULT_EMBED_FORMAT, embed_key, embed_text, search_text
from gbr.core.records import Chunk
from gbr.core.store.writes import StoredChunk
from gbr.core.telemetry import log

VectorLookup = Callable[[Sequence[str]], dict[str, np.ndarray]]


class SharedVectors(Protocol):
    """Vectors kept beyond one index (gbr.core.embed.cache), by the same embed keys."""

    def lookup(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def store(self, vectors: Mapping[str, np.ndarray]) -> None: ...


# (newly embedded, to embed in this call): first (0, total), then once per slice.
EmbedProgress = Callable[[int, int], None]
# Chunks per model call when progress is reported: a big file's ~30 s moves in ~1 s steps.
PROGRESS_STEP = 32
# Texts tokenized and embedded at once otherwise. One 10 MB file makes tens of thousands of
# chunks, and tokenizing them all in one call held every encoding in memory at once.
EMBED_SLICE = 256


def prepare_chunks(
    chunks: Sequence[Chunk], embedder: Embedder, embed_format: str = DEFAULT_EMBED_FORMAT
) -> list[StoredChunk]:
    """Everything a stored chunk needs but its vector (None): what a parser can do alone, so
    a file reaches the index, and BM25, before the model has seen it."""
    out = []
    for c in chunks:
        text = embed_text(c, embed_format)
        out.append(
            StoredChunk(
                chunk=c,
                search_text=search_text(c),
                tokens=embedder.count_tokens(text),
                embed_hash=embed_key(embedder.model_id, text),
                vector=None,
            )
        )
    return out


def known_vectors(
    keys: Sequence[str], cached: VectorLookup, shared: SharedVectors | None = None
) -> dict[str, np.ndarray]:
    """The vectors of these embed keys that this index (`cached`) or the shared cache hold."""
    wanted = sorted(set(keys))
    known = cached(wanted) if wanted else {}
    if shared is not None and len(known) < len(wanted):
        known.update(shared.lookup([k for k in wanted if k not in known]))
    return known


def with_known_vectors(
    items: Sequence[StoredChunk], cached: VectorLookup, shared: SharedVectors | None = None
) -> tuple[list[StoredChunk], int]:
    """The chunks with every vector a cache holds filled in, and how many were filled."""
    missing = [i.embed_hash for i in items if i.vector is None]
    if not missing:
        return list(items), 0
    known = known_vectors(missing, cached, shared)
    out = [
        replace(i, vector=known[i.embed_hash]) if i.vector is None and i.embed_hash in known else i
        for i in items
    ]
    return out, sum(1 for i in items if i.vector is None and i.embed_hash in known)


def embed_texts(
    texts: Mapping[str, str], embedder: Embedder, shared: SharedVectors | None = None
) -> dict[str, np.ndarray]:
    """Vectors for texts by embed key, shortest first in slices; the shared cache hears of
    them. For the texts left without a vector when the chunks were written."""
    keys = sorted(texts, key=lambda k: len(texts[k]))
    out: dict[str, np.ndarray] = {}
    for at in range(0, len(keys), EMBED_SLICE):
        part = keys[at : at + EMBED_SLICE]
        fresh = embedder.embed_batch([texts[k] for k in part])
        out.update({k: fresh[row] for row, k in enumerate(part)})
    if shared is not None and out:
        shared.store(out)
    return out


def embed_chunks(
    chunks: Sequence[Chunk],
    embedder: Embedder,
    cached: VectorLookup,
    embed_format: str = DEFAULT_EMBED_FORMAT,
    on_progress: EmbedProgress | None = None,
    shared: SharedVectors | None = None,
) -> tuple[list[StoredChunk], list[bool]]:
    """Stored chunks in input order, and for each whether its vector came from a cache:
    this index's own (`cached`) first, then the `shared` one, which hears of new vectors.

    The chunks to embed go to the model in slices, shortest first so that each slice still
    pads little (small ones when `on_progress` is given, which hears of each slice).
    """
    texts = [embed_text(c, embed_format) for c in chunks]
    keys = [embed_key(embedder.model_id, t) for t in texts]
    known = known_vectors(keys, cached, shared)
    firsts: dict[str, int] = {}  # a text repeated within the batch is embedded once
    for i, key in enumerate(keys):
        if key not in known:
            firsts.setdefault(key, i)
    missing = list(firsts.values())
    vectors: dict[int, np.ndarray] = {}
    if on_progress is not None:
        on_progress(0, len(missing))
    step = EMBED_SLICE if on_progress is None else PROGRESS_STEP
    by_length = sorted(missing, key=lambda i: len(texts[i]))  # each slice pads little
    done = 0
    new: dict[str, np.ndarray] = {}
    for part in (by_length[at : at + step] for at in range(0, len(by_length), step)):
        fresh = embedder.embed_batch([texts[i] for i in part])
        for row, i in enumerate(part):
            vectors[i] = fresh[row]
            known.setdefault(keys[i], fresh[row])
            new[keys[i]] = fresh[row]
        if shared is not None and (len(new) >= EMBED_SLICE or done + len(part) == len(missing)):
            shared.store(new)  # in steps, so an interrupted big file keeps what it paid for
            new = {}
        if on_progress is not None:
            on_progress(len(part), len(missing))
        before, done = done, done + len(part)
        if len(missing) > EMBED_SLICE and done // EMBED_SLICE > before // EMBED_SLICE:
            log().info("embedding_progress", done=done, total=len(missing))
    stored = [
        StoredChunk(
            chunk=c,
            search_text=search_text(c),
            tokens=embedder.count_tokens(texts[i]),
            embed_hash=keys[i],
            vector=vectors[i] if i in vectors else known[keys[i]],
        )
        for i, c in enumerate(chunks)
    ]
    fresh_rows = set(missing)
    return stored, [i not in fresh_rows for i in range(len(chunks))]
