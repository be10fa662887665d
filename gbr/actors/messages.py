"""Messages between the pipeline's actors: commands say what to do, events what happened."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gbr.core.graph.model import FileGraph
from gbr.core.records import FileProblem, SourceFile
from gbr.core.store.writes import StoredChunk

Outcome = Literal["indexed", "unchanged", "dropped", "removed"]


@dataclass(frozen=True, slots=True)
class ScanTree:
    """Walker: find every file under the root and send the changed ones on."""


@dataclass(frozen=True, slots=True)
class FileFound:
    """Parser: a new or changed file to chunk."""

    source: SourceFile
    known: bool = True  # the index holds an earlier version (whose vectors may serve again)

    @property
    def path(self) -> str:
        return self.source.path


@dataclass(frozen=True, slots=True)
class FileEmbedded:
    """Writer: a file's chunks, ready to swap in atomically, without their vectors: the
    writer fills in those the caches hold, and the embedder the rest, behind the write
    (EmbedMissing). The name keeps the message's old place in the pipeline."""

    source: SourceFile
    chunks: tuple[StoredChunk, ...]
    partial: FileProblem | None = None
    graph: FileGraph | None = None
    # Whether the index held an earlier version: only then can its vectors serve chunks
    # without one here (a new file's texts met elsewhere in the index are found later,
    # in one statement: Store.fill_from_index).
    known: bool = True

    @property
    def path(self) -> str:
        return self.source.path


@dataclass(frozen=True, slots=True)
class FileFailed:
    """Writer: a file that cannot be indexed; its old chunks stay, marked stale."""

    problem: FileProblem
    source: SourceFile | None = None

    @property
    def path(self) -> str:
        return self.problem.path


@dataclass(frozen=True, slots=True)
class FilesRemoved:
    """Writer: files gone from disk whose chunks must go too."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FinishRun:
    """Writer: all files are through; bring the full-text index up to date and checkpoint.

    Whether it needs it is in the store (`fulltext_stale`), set by every write that changes
    chunks, so a run killed before this message still leaves the next run to do it."""

    summary_json: str


@dataclass(frozen=True, slots=True)
class SummaryWanted:
    """Coordinator (asked): the run's summary so far, as a frozen IndexSummary."""


@dataclass(frozen=True, slots=True)
class FileDone:
    """Coordinator: one file has reached the end of the pipeline."""

    path: str
    outcome: Outcome
    chunks: int = 0
    cached: int = 0  # chunks whose vector a cache held when the file was written
    problem: FileProblem | None = None


@dataclass(frozen=True, slots=True)
class ChunksQueued:
    """Coordinator: `chunks` chunks are written without a vector and wait for the embedder."""

    chunks: int


@dataclass(frozen=True, slots=True)
class WalkFinished:
    """Coordinator: the walker has sent everything; each of these paths will report back."""

    paths: frozenset[str]
    seen: int  # files found on disk (the rest of `paths` were removed ones)


# ---- embedding behind the write: chunks first, vectors after


@dataclass(frozen=True, slots=True)
class ChunksIn:
    """Writer (asked): every file's chunks are in; bring the full-text index up to date and
    publish the index to readers, who can now search it by BM25."""


@dataclass(frozen=True, slots=True)
class EmbedMissing:
    """Embedder: embed the next page of texts still without a vector, after `after`
    ((tokens, embed hash), None for the first), then ask itself for the next page."""

    after: tuple[int, str] | None = None


@dataclass(frozen=True, slots=True)
class VectorsFound:
    """Writer: vectors by embed hash, for the chunks still without one (one UPDATE); when
    `cached`, the shared cache held them and the model did not run."""

    vectors: Mapping[str, np.ndarray]
    cached: bool = False


@dataclass(frozen=True, slots=True)
class KeepFinished:
    """Writer (asked): the run was interrupted. Write the files waiting, show the index as
    written to readers (IndexOptions.keep) before `until` (time.monotonic), then write
    nothing more; the answer says whether it was shown."""

    until: float


@dataclass(frozen=True, slots=True)
class VectorsDone:
    """Writer: no text is left without a vector; every VectorsFound before it is written."""


@dataclass(frozen=True, slots=True)
class VectorsStored:
    """Coordinator: `count` more chunks got their vector in the index, from the model or,
    when `cached`, from vectors the index already held for the same text."""

    count: int
    cached: bool = False
