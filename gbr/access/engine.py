"""The work behind both sides of the seam: `LocalIndex` runs it in the caller's process,
the daemon's service runs it for HTTP and MCP clients. Building the searcher, the options of
an index run and a search are written here once, so an option or a fix lands in both.

What a question is answered with is the other half, in gbr.access.answering.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gbr.access.base import Found
from gbr.access.requests import SearchRequest
from gbr.core.rank.filter_hint import filter_hint
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.store import vector_file
from gbr.core.store.postings_memory import SERVING_BUDGET

if TYPE_CHECKING:
    from gbr.actors.pipeline import IndexOptions
    from gbr.core.embed.cache_config import CacheConfig
    from gbr.core.embed.embedder import Embedder
    from gbr.core.records import Hit
    from gbr.core.store.facade import Store
    from gbr.core.store.test_words import TestWords


class IndexedTree(Protocol):
    """What decides which files an index run walks and how: LocalSettings and the daemon's
    DaemonConfig both carry it."""

    @property
    def root(self) -> Path: ...
    @property
    def include_deps(self) -> bool: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def ignore(self) -> tuple[str, ...]: ...
    @property
    def follow_outside_links(self) -> bool: ...
    @property
    def embed_cache(self) -> CacheConfig | None: ...
    @property
    def test_words(self) -> TestWords | None: ...


def index_options(tree: IndexedTree, db: Path, **run: Any) -> IndexOptions:
    """The options of an index run over `tree` into `db`; `run` adds what only one side
    sets (a staged run here, a restricted run or a cancel event in the daemon)."""
    from gbr.actors.pipeline import IndexOptions  # the actors load only for `index`

    return IndexOptions(
        root=tree.root,
        db=db,
        include_deps=tree.include_deps,
        max_bytes=tree.max_bytes,
        ignore=tree.ignore,
        follow_outside_links=tree.follow_outside_links,
        embed_cache=tree.embed_cache,
        test_words=tree.test_words,
        **run,
    )


def open_searcher(
    store: Store,
    model: Embedder,
    ranking: Ranking,
    *,
    db: Path,
    serving: bool,
    write_vector_file: bool = True,
) -> Searcher:
    """A searcher over `store`, the index file `db`.

    The vectors are mapped from the file beside the index when it is good (at 1M chunks,
    reading every vector took the first search 25 s and 12 GB). A searcher `serving` many
    queries (the daemon, a chat, `search -`) also holds BM25's postings, within
    SERVING_BUDGET; one made for a single query would spend more time reading them than
    it saves.
    """
    return Searcher(
        store,
        model,
        ranking=ranking,
        vector_file=vector_file.file_for(db),
        write_vector_file=write_vector_file,
        postings_budget=SERVING_BUDGET if serving else 0,
    )


def found(searcher: Searcher, request: SearchRequest, hits: list[Hit] | tuple[Hit, ...]) -> Found:
    """The hits, with a hint when they are none because a path or module filter excludes
    all, and how much of the index dense search could see."""
    where = request.where
    hint = filter_hint(searcher.store, where) if not hits and (where.module or where.path) else None
    return Found(request.query, request.mode, tuple(hits), hint, searcher.coverage())


def search(searcher: Searcher, request: SearchRequest) -> Found:
    """Run one search, held to the limits every door shares."""
    request.check()
    hits = searcher.search(request.query, request.k, request.mode, request.where)
    return found(searcher, request, hits)
