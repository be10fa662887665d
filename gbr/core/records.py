"""Typed records shared by the pipeline stages, the store and the CLI."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict, get_args

ChunkKind = Literal["function", "type", "type_alias", "constant", "external_type", "module"]
Visibility = Literal["pub", "private"]
# What a search does with test and example code (gbr.core.rank.priors applies it).
TestPolicy = Literal["include", "demote", "exclude"]
TEST_POLICIES: tuple[TestPolicy, ...] = get_args(TestPolicy)
DEFAULT_TEST_POLICY: TestPolicy = "demote"
# How a search ranks: by meaning (dense), by words (bm25), or both fused.
Mode = Literal["hybrid", "dense", "bm25"]
MODES: tuple[Mode, ...] = get_args(Mode)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A `.gleam` file found by the walker, read and hashed once."""

    path: str  # relative to the indexed root, always with forward slashes
    module: str  # `gleam/list` for `src/gleam/list.gleam`
    package: str
    content: bytes
    content_hash: str
    size: int
    mtime: float
    outside: bool = False  # reached through a link out of the indexed root (walker.FoundFile)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One AST node (or one part of an oversized node) ready to embed and store."""

    path: str
    module: str
    package: str
    kind: ChunkKind
    name: str
    signature: str
    visibility: Visibility
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    part: int  # 0 for a whole node; 0..n-1 for the parts of a split node
    parts: int  # how many parts the node was split into (1 when whole)
    doc: str
    text: str  # the raw source lines start_line..end_line
    header: str = ""  # the parent signature repeated above parts after the first


@dataclass(frozen=True, slots=True)
class FileProblem:
    """Why a file could not be indexed; the file is dropped alone and the run goes on."""

    path: str
    reason: str  # one line, for people
    kind: str  # parse_failed, invalid_utf8, binary, too_large, permission_denied, ...
    line: int | None = None
    column: int | None = None
    excerpt: str = ""
    # For a `parse_partial` file: the 1-based inclusive line ranges that were left out.
    dropped_lines: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PartialFile:
    """A file of which only some definitions parsed: those chunks, and what was left out.

    `problem.kind` is `parse_partial`; it names the first syntax error and the dropped lines.
    """

    chunks: tuple[Chunk, ...]
    problem: FileProblem


@dataclass(frozen=True, slots=True)
class IndexSummary:
    """What one `index` run did; printed by the CLI and returned as JSON.

    Frozen: the coordinator counts a run and hands out copies, and `run_index` adds what
    only it knows with `dataclasses.replace`."""

    root: str
    db: str
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_dropped: int = 0
    files_partial: int = 0  # indexed, but some definitions did not parse (also in indexed)
    files_removed: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    chunks_cached: int = 0
    cache_hits: int = 0  # of the shared embed cache (gbr.core.embed.cache), in chunks_cached
    cache_misses: int = 0  # texts it did not hold, embedded and added to it
    restarts: int = 0
    dead_letters: int = 0
    seconds: float = 0.0
    # When every chunk was in and BM25-searchable, for a run that embeds behind the write.
    seconds_searchable: float | None = None
    reindex_reason: str | None = None
    # Chunks the index holds after the run (None when the run did not count them): a run
    # that changed nothing says this rather than `0 chunks`, which reads as an empty index.
    chunks_in_index: int | None = None
    dropped: tuple[FileProblem, ...] = ()
    partial: tuple[FileProblem, ...] = ()

    @property
    def changed_nothing(self) -> bool:
        """No file was indexed, removed or newly dropped, and no vector filled in: the index
        is as it was."""
        return (
            self.files_indexed == 0
            and self.files_removed == 0
            and self.chunks == 0
            and self.vectors_filled == 0
        )

    @property
    def vectors_filled(self) -> int:
        """Vectors given to chunks an earlier run wrote (a run cut short left them out)."""
        return max(0, self.chunks_embedded + self.chunks_cached - self.chunks)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "root": self.root,
            "db": self.db,
            "files_seen": self.files_seen,
            "files_indexed": self.files_indexed,
            "files_unchanged": self.files_unchanged,
            "files_dropped": self.files_dropped,
            "files_partial": self.files_partial,
            "files_removed": self.files_removed,
            "chunks": self.chunks,
            "chunks_embedded": self.chunks_embedded,
            "chunks_cached": self.chunks_cached,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "restarts": self.restarts,
            "dead_letters": self.dead_letters,
            "seconds": round(self.seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 1),
            "seconds_searchable": (
                None if self.seconds_searchable is None else round(self.seconds_searchable, 3)
            ),
            "reindex_reason": self.reindex_reason,
            "chunks_in_index": self.chunks_in_index,
            "dropped": [
                {"path": p.path, "kind": p.kind, "reason": p.reason, "line": p.line}
                for p in self.dropped
            ],
            "partial": [
                {
                    "path": p.path,
                    "kind": p.kind,
                    "reason": p.reason,
                    "line": p.line,
                    "dropped_lines": [list(r) for r in p.dropped_lines],
                }
                for p in self.partial
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexSummary:
        """The summary back from its JSON form, as the daemon's API returns it."""
        names = {f.name for f in fields(cls)} - {"dropped", "partial"}
        dropped = tuple(
            FileProblem(d["path"], d["reason"], d["kind"], d.get("line"))
            for d in data.get("dropped", [])
        )
        partial = tuple(
            FileProblem(
                d["path"],
                d["reason"],
                d["kind"],
                d.get("line"),
                dropped_lines=tuple((a, b) for a, b in d.get("dropped_lines", [])),
            )
            for d in data.get("partial", [])
        )
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known, dropped=dropped, partial=partial)


@dataclass(frozen=True, slots=True)
class FileState:
    """What the index knows of a file: its content hash and how its last indexing went."""

    content_hash: str
    status: str  # ok | failed | partial
    error: str = ""  # why, for a failed or partial file


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which chunks a search may return, as data: the store alone turns it into SQL.

    A path prefix or glob, a module and the modules under it, chunk kinds, and what to do
    with test and example code (`tests`: include, demote below library code, or exclude).
    """

    path: str | None = None
    module: str | None = None
    kinds: tuple[str, ...] = ()
    tests: TestPolicy = DEFAULT_TEST_POLICY

    def __bool__(self) -> bool:
        """Whether it keeps any chunk out (`demote` only reorders)."""
        return bool(self.path or self.module or self.kinds or self.tests == "exclude")


NO_FILTER = SearchFilter()


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A stored chunk as search reads it back: a Chunk's fields, its id, and whether it is
    kept from an earlier version of a file that no longer parses (`stale`)."""

    id: int
    path: str
    module: str
    package: str
    kind: str
    name: str
    signature: str
    visibility: str
    start_line: int
    end_line: int
    part: int
    parts: int
    doc: str
    text: str
    header: str
    stale: bool


@dataclass(frozen=True, slots=True)
class NodePart:
    """One part of a split node, for widening a hit to the whole node."""

    start_line: int
    end_line: int
    part: int
    text: str


@dataclass(frozen=True, slots=True)
class FileIssue:
    """A file the index holds as `failed` or `partial`: why, and the chunks it still has."""

    path: str
    error_kind: str | None
    error: str | None
    stale_chunks: int
    chunks: int

    def problem(self) -> FileProblem:
        """The problem a run reports for this file (no position: the index keeps none)."""
        return FileProblem(self.path, self.error or "", self.error_kind or "")

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "error_kind": self.error_kind,
            "error": self.error,
            "stale_chunks": self.stale_chunks,
            "chunks": self.chunks,
        }


class IndexCounts(TypedDict):
    """How much the index holds; a mapping because `status --json` and the daemon's
    metrics read it by key and spread it into their reports."""

    files: int
    files_ok: int
    files_failed: int
    files_partial: int
    chunks: int
    stale_chunks: int


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a whole node, its split parts collapsed into one."""

    rank: int
    path: str
    module: str
    name: str
    kind: str
    start_line: int
    end_line: int
    score: float
    text: str
    signature: str = ""
    doc: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "path": self.path,
            "module": self.module,
            "name": self.name,
            "kind": self.kind,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 6),
            "text": self.text,
            "signature": self.signature,
            "doc": self.doc,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hit:
        """A hit back from its JSON form (the daemon's /search, or a chunk of `ask --json`).

        Keys other than the hit's own, like a chunk's `truncated`, are ignored.
        """
        return cls(
            rank=int(data["rank"]),
            path=data["path"],
            module=data["module"],
            name=data["name"],
            kind=data["kind"],
            start_line=int(data["start_line"]),
            end_line=int(data["end_line"]),
            score=float(data["score"]),
            text=data["text"],
            signature=data.get("signature") or "",
            doc=data.get("doc") or "",
        )


@dataclass(frozen=True, slots=True)
class Progress:
    """How far an index run has got; the coordinator sends one after each event it hears."""

    done: int
    expected: int | None  # None until the walk has finished
    chunks: int
    dropped: int
    elapsed: float
    # Once every file's chunks are written: those still without a vector, and how many of
    # them have one now (the embedder fills them in behind the write).
    chunks_queued: int = 0
    chunks_embedded: int = 0
    files_indexed: int = 0

    @property
    def rate(self) -> float:
        """Chunks embedded per second since the run started."""
        return self.chunks_embedded / self.elapsed if self.elapsed > 0 else 0.0

    def chunks_left(self) -> float | None:
        """Chunks still to embed; None until the walk has finished."""
        if self.expected is None:
            return None
        return float(max(0, self.chunks_queued - self.chunks_embedded))

    def eta(self) -> float | None:
        """Seconds left at the rate so far, or None while there is no rate to go by."""
        left = self.chunks_left()
        if left is None or self.rate <= 0:
            return None
        return left / self.rate


ProgressCallback = Callable[[Progress], None]
