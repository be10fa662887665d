"""Why a search with `--module` or `--path` found nothing, and what the index holds instead.

An empty result is ambiguous: no code was close enough, or the filter excludes everything
(a typo, `gleam/lists` for `gleam/list`, a path given from the wrong folder). The second
deserves one line naming the filter and the nearest values that do exist.
"""

from __future__ import annotations

import difflib

from gbr.core.records import SearchFilter as Filter
from gbr.core.store.facade import Store

SHOWN = 8  # values listed after "modules here:" / "folders here:"


def filter_hint(store: Store, where: Filter) -> str | None:
    """One line when `--module`/`--path` alone match no chunk; None when they match some."""
    if not store.counts()["chunks"]:
        return None  # an empty index says so elsewhere
    if where.module and not store.any_chunk(Filter(module=where.module)):
        modules = store.modules()
        return (
            f"no chunk is in module {where.module}; modules here: {_listing(where.module, modules)}"
        )
    if where.path and not store.any_chunk(Filter(path=where.path)):
        folders = store.folders()
        return (
            f"no chunk is under path {where.path} (paths are relative to the package root); "
            f"folders here: {_listing(where.path, [f or './' for f in folders])}"
        )
    if where.module and where.path and not store.any_chunk(Filter(where.path, where.module)):
        return f"no chunk is both in module {where.module} and under path {where.path}"
    return None


def _listing(wanted: str, values: list[str]) -> str:
    """The closest values first (a likely typo), then the rest in order, at most SHOWN."""
    close = difflib.get_close_matches(wanted, values, n=3, cutoff=0.6)
    ordered = close + [v for v in values if v not in close]
    more = len(ordered) - SHOWN
    text = ", ".join(ordered[:SHOWN])
    return f"{text} (and {more} more)" if more > 0 else text
