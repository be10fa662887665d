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

VectorLookup = Callable[[Sequence[str]], dict[str, np.ndarray]]


class SharedVectors(Protocol):
    """Vectors kept beyond one index (gbr.core.embed.cache), by the same embed keys."""

    def lookup(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def store(self, vectors: Mapping[str, np.ndarray]) -> None: ...


# Texts tokenized and embedded at once. One 10 MB file makes tens of thousands of chunks,
# and tokenizing them all in one call held every encoding in memory at once.
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


def embed_now(
    chunks: Sequence[Chunk], embedder: Embedder, embed_format: str = DEFAULT_EMBED_FORMAT
) -> list[StoredChunk]:
    """Stored chunks with their vectors at once, made by the pipeline's own two steps
    (prepare_chunks, then embed_texts): for a caller that writes a few chunks itself, as
    tests and benches do, rather than through the index pipeline."""
    stored = prepare_chunks(chunks, embedder, embed_format)
    texts = {s.embed_hash: embed_text(s.chunk, embed_format) for s in stored}
    vectors = embed_texts(texts, embedder)
    return [replace(s, vector=vectors[s.embed_hash]) for s in stored]
