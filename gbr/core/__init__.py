"""The logic of gbr as plain functions and records: no actors, no front doors.

The public face below is what `gbr.actors` and the front doors reach for; each name is
imported on first use (PEP 562), because importing `gbr.core.errors` must not load DuckDB,
NumPy or onnxruntime: the CLI answers `--help` without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gbr.core.lazy import lazy_names

if TYPE_CHECKING:
    from gbr.core.embed.embedder import Embedder, OnnxEmbedder
    from gbr.core.errors import ConfigError, GbrError, StoreError
    from gbr.core.paths import default_db, package_root
    from gbr.core.rank.search import Searcher
    from gbr.core.records import (
        Chunk,
        Hit,
        IndexSummary,
        Progress,
        ProgressCallback,
        SearchFilter,
        SourceFile,
    )
    from gbr.core.store.facade import Store

_HOMES = {
    "ConfigError": "gbr.core.errors",
    "GbrError": "gbr.core.errors",
    "StoreError": "gbr.core.errors",
    "Chunk": "gbr.core.records",
    "Hit": "gbr.core.records",
    "IndexSummary": "gbr.core.records",
    "Progress": "gbr.core.records",
    "ProgressCallback": "gbr.core.records",
    "SearchFilter": "gbr.core.records",
    "SourceFile": "gbr.core.records",
    "Embedder": "gbr.core.embed.embedder",
    "OnnxEmbedder": "gbr.core.embed.embedder",
    "Searcher": "gbr.core.rank.search",
    "Store": "gbr.core.store.facade",
    "default_db": "gbr.core.paths",
    "package_root": "gbr.core.paths",
}

__all__ = [
    "Chunk",
    "ConfigError",
    "Embedder",
    "GbrError",
    "Hit",
    "IndexSummary",
    "OnnxEmbedder",
    "Progress",
    "ProgressCallback",
    "SearchFilter",
    "Searcher",
    "SourceFile",
    "Store",
    "StoreError",
    "default_db",
    "package_root",
]


__getattr__ = lazy_names(__name__, _HOMES)
