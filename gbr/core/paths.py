"""Where a package and its index are: the package root, the default index file, and the
upward search for `.gbr/index.duckdb` that commands without `--db` use.

The upward search works like git's search for `.git`, with ceilings so that it never
wanders into someone else's index: it stops at the package root (the nearest folder with a
`gleam.toml`), at a filesystem boundary, and it never climbs into the home folder, the
filesystem root, or a folder listed in GBR_CEILING_DIRECTORIES (colon-separated absolute
paths, like GIT_CEILING_DIRECTORIES). The folder it starts in is always looked at.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from gbr.core.environ import CEILING_DIRECTORIES, gbr_home
from gbr.core.errors import ConfigError

# The files gbr ships beside its code (tokenizer, int8 ranges, ranker weights).
DATA_DIR = Path(__file__).parent / "data"

INDEX_DIR = ".gbr"
INDEX_NAME = "index.duckdb"
PACKAGE_MARKER = "gleam.toml"
CEILING_ENV = CEILING_DIRECTORIES.name
# How deep `index` looks under a folder for a gleam.toml before it asks whether to go on,
# and how many folders it opens at most while looking (a home folder holds a great many).
PACKAGE_DEPTH = 3
PACKAGE_SCAN_LIMIT = 2000
_SKIP_DIRS = {"node_modules", "build", "_build", "__pycache__"}


def default_db(root: Path) -> Path:
    return root / INDEX_DIR / INDEX_NAME


IGNORE_ALL = "# Written by gbr: the index and its files stay out of version control.\n*\n"


def keep_out_of_git(folder: Path) -> None:
    """Write `folder/.gitignore` holding `*` unless one is there, as caches do: an index is
    hundreds of megabytes of derived data that `git add .` must never pick up. Best effort:
    a folder gbr may write its index to but not this file still gets its index."""
    ignore = folder / ".gitignore"
    if ignore.exists():
        return
    with contextlib.suppress(OSError):
        ignore.write_text(IGNORE_ALL, encoding="utf-8")


def package_root(path: Path) -> Path:
    """The folder to index, resolved; anything else is a ConfigError that says so."""
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{path} is not a folder; pass the path of a Gleam package")
    return root


def ceilings(env: Mapping[str, str]) -> frozenset[Path]:
    """Folders the upward search never climbs into: home, `/`, and GBR_CEILING_DIRECTORIES.

    Relative entries are ignored, as git ignores them: a ceiling that moves with the current
    folder would be a surprise.
    """
    found = {Path("/")}
    home = env.get("HOME")
    if home and Path(home).is_absolute():
        found.add(Path(home).resolve())
    for entry in env.get(CEILING_ENV, "").split(":"):
        if entry and Path(entry).is_absolute():
            found.add(Path(entry).resolve())
    return frozenset(found)


def search_folders(start: Path, env: Mapping[str, str]) -> Iterator[Path]:
    """The folders the upward search looks in, nearest first, ceilings applied."""
    stops = ceilings(env)
    folder = start.resolve()
    while True:
        yield folder  # the start is looked at even when it is a ceiling itself
        parent = folder.parent
        if folder in stops or parent in stops or (folder / PACKAGE_MARKER).is_file():
            return
        try:
            if parent.stat().st_dev != folder.stat().st_dev:
                return  # another filesystem: a mount point is a boundary, as for git
        except OSError:
            return
        folder = parent


def find_index(start: Path, env: Mapping[str, str]) -> Path:
    """The nearest `.gbr/index.duckdb` from `start` upwards, or a ConfigError that says where
    the search stopped and how to go on."""
    last = start
    for folder in search_folders(start, env):
        candidate = default_db(folder)
        if candidate.is_file():
            return candidate
        last = folder
    raise ConfigError(
        f"no index found from here up to {last}; run `gleambrctl index PATH` or pass --db FILE"
    )


def wide_folder(root: Path, env: Mapping[str, str]) -> str | None:
    """Why indexing `root` may walk far more than a package, or None when it looks like one.

    The filesystem root and the home folder always qualify; any other folder does when no
    `gleam.toml` sits in it or below within PACKAGE_DEPTH levels.
    """
    home = env.get("HOME")
    if root == Path(root.anchor):
        return f"{root} is the filesystem root"
    if home and root == Path(home).resolve():
        return f"{root} is your home folder"
    if _has_package(root):
        return None
    return f"{root} holds no {PACKAGE_MARKER} within {PACKAGE_DEPTH} levels"


def _has_package(root: Path) -> bool:
    """A bounded, breadth-first look for gleam.toml (hidden and build folders skipped)."""
    level = [root]
    opened = 0
    for _ in range(PACKAGE_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            if (folder / PACKAGE_MARKER).is_file():
                return True
            opened += 1
            if opened > PACKAGE_SCAN_LIMIT:
                return False
            try:
                with os.scandir(folder) as entries:
                    below.extend(
                        Path(e.path)
                        for e in entries
                        if e.is_dir(follow_symlinks=False)
                        and not e.name.startswith(".")
                        and e.name not in _SKIP_DIRS
                    )
            except OSError:
                continue
        level = below
    return False


def cache_home(env: Mapping[str, str]) -> Path | None:
    """gbr's home for its own files: GBR_HOME, else the user's cache folder
    (gbr.core.environ.gbr_home). (Here, not in embed_cache: a search asks it where the ONNX
    graph is kept and would otherwise import sqlite3.)"""
    return gbr_home(env, "cache")
