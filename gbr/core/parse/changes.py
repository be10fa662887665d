"""Which file-system changes a daemon must re-index, and how.

A watcher reports every change under the package root, including the DuckDB file and the
events log the daemon itself writes under `.gbr/`. This module keeps what matters: `.gleam`
files (re-walked alone), folders that appeared or vanished (re-walked as a whole), and the
files that change the fate of every other one, `.gitignore`, `.gbrignore` and `gleam.toml`,
which ask for a full pass. The walker still has the last word on each path (ignores, `build/`),
so this filter only has to be cheap and never drop a change that matters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from gbr.core.parse.walker import ALWAYS_SKIP

ChangeKind = Literal["added", "modified", "deleted"]

# Folders whose contents never hold modules: the index itself, VCS data, tool caches.
# A change to one of these can change which files are indexed, or their module names.
FULL_PASS_NAMES = frozenset({".gitignore", ".gbrignore", "gleam.toml"})


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """What one debounced batch of changes asks of the indexer."""

    paths: frozenset[str]  # relative to the root: files, or folders to walk whole
    full: bool = False  # a full pass is needed (then `paths` is moot)

    def __bool__(self) -> bool:
        return self.full or bool(self.paths)


def relevant(kind: ChangeKind, rel: str) -> bool:
    """Whether a change at `rel` (relative, forward slashes) can affect the index."""
    path = PurePosixPath(rel)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        return False
    *folders, name = path.parts
    if any(part.startswith(".") or part in ALWAYS_SKIP for part in folders):
        return False
    if name in FULL_PASS_NAMES:
        return True
    if name.startswith("."):  # editor lock and swap files: `.#x.gleam`, `.x.gleam.swp`
        return False
    if name.endswith(".gleam"):
        return True
    # A name without a suffix that appeared or vanished may be a folder moved in or out as a
    # whole; a folder's own "modified" events carry nothing its files do not.
    return kind != "modified" and "." not in name and name not in ALWAYS_SKIP


def classify(changes: Iterable[tuple[ChangeKind, str]]) -> ChangeSet:
    """The paths to re-walk for a batch of (kind, relative path) changes."""
    paths: set[str] = set()
    full = False
    for kind, rel in changes:
        if not relevant(kind, rel):
            continue
        if PurePosixPath(rel).name in FULL_PASS_NAMES:
            full = True
        else:
            paths.add(rel)
    return ChangeSet(frozenset(paths), full)
