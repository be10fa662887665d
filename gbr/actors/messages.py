"""Messages between the pipeline's actors: commands say what to do, events what happened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gbr.core.graph.model import FileGraph
from gbr.core.records import Chunk, FileProblem, SourceFile
from gbr.core.store_writes import StoredChunk

Outcome = Literal["indexed", "unchanged", "dropped", "removed"]


@dataclass(frozen=True, slots=True)
class ScanTree:
    """Walker: find every file under the root and send the changed ones on."""


@dataclass(frozen=True, slots=True)
class FileFound:
    """Parser: a new or changed file to chunk."""

    source: SourceFile

    @property
    def path(self) -> str:
        return self.source.path


@dataclass(frozen=True, slots=True)
class FileParsed:
    """Embedder: a file's chunks, waiting for vectors."""

    source: SourceFile
    chunks: tuple[Chunk, ...]
    partial: FileProblem | None = None  # some definitions did not parse (`parse_partial`)
    graph: FileGraph | None = None  # read from the same parse, written with the chunks

    @property
    def path(self) -> str:
        return self.source.path


@dataclass(frozen=True, slots=True)
class FileEmbedded:
    """Writer: a file's chunks with vectors, to swap in atomically."""

    source: SourceFile
    chunks: tuple[StoredChunk, ...]
    embedded: int
    cached: int
    partial: FileProblem | None = None
    graph: FileGraph | None = None

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
    embedded: int = 0
    cached: int = 0
    problem: FileProblem | None = None


@dataclass(frozen=True, slots=True)
class ChunksQueued:
    """Coordinator: the embedder took `files` files, of whose chunks `chunks` need vectors."""

    files: int
    chunks: int


@dataclass(frozen=True, slots=True)
class ChunksEmbedded:
    """Coordinator: `count` more chunks have vectors; sent mid-batch, so a big file shows."""

    count: int


@dataclass(frozen=True, slots=True)
class WalkFinished:
    """Coordinator: the walker has sent everything; each of these paths will report back."""

    paths: frozenset[str]
    seen: int  # files found on disk (the rest of `paths` were removed ones)
