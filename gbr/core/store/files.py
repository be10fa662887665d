"""The index file on disk: the DuckDB set-up of each connection, the folder it lives in,
paths that are not index files, moving a damaged file aside, and text DuckDB can take."""

from __future__ import annotations

import os
import time
from importlib.util import find_spec
from pathlib import Path

import duckdb

from gbr.core.errors import StoreError
from gbr.core.paths import INDEX_DIR, keep_out_of_git
from gbr.core.store.errors import one_line

# Every connection's settings. The fts extension is loaded from the pip package pinned with
# duckdb (below), a file of the same origin and trust as duckdb's own library beside it;
# DuckDB's check of its signature hashed its 11.6 MB on each connection, 80-90 ms of a cold
# search against 2-18 ms to load it unchecked (2 cores, interleaved x5). With unsigned
# files allowed, DuckDB may load no extension on its own: gbr names each one it loads, and
# needs no other (core_functions, icu, json and parquet are built into the Python package),
# so an index file from elsewhere cannot make it load one either.
CONNECT_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "allow_unsigned_extensions": True,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
}


def set_up(con: duckdb.DuckDBPyConnection) -> None:
    """Every connection: the fts extension, and no progress bar. DuckDB draws its bar on
    file descriptor 1 for a slow statement even when stdout is a pipe, and for
    `gleambrctl mcp` stdout is the protocol channel."""
    con.execute(f"LOAD '{_extension_path('fts')}'")
    con.execute("SET enable_progress_bar = false")


def _extension_path(name: str) -> Path:
    spec = find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(
            f"the DuckDB {name} extension package is missing; run `make install` "
            f"(pip install duckdb-extension-{name}=={duckdb.__version__})"
        )
    base = Path(next(iter(spec.submodule_search_locations)))
    path = base / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise StoreError(
            f"no {name} extension for duckdb {duckdb.__version__} at {path}; "
            f"install duckdb-extension-{name}=={duckdb.__version__}"
        )
    return path


def refuse_odd_file(db: Path) -> None:
    """An index is a regular file: `--db /dev/null` (or a folder, a FIFO) is refused before
    anything is written beside it, copied from it or renamed over it."""
    if db.exists() and not db.is_file():
        raise StoreError(f"{db} is not a regular file; pass --db with the path of an index file")


def prepare_folder(db: Path) -> None:
    """Create the index's folder, or say in one line why it cannot be and what to do."""
    refuse_odd_file(db)
    created = not db.parent.exists()
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {db.parent} for the index "
            f"({exc.strerror or one_line(exc)}); pass --db with a file in a writable folder"
        ) from exc
    if created or db.parent.name == INDEX_DIR:
        keep_out_of_git(db.parent)


def set_aside(path: Path) -> Path:
    """Move a damaged index file (and its WAL) to `<name>.corrupt-<UTC time>`; returns where
    (older gbr versions also set files aside as `old-`: ASIDE_LABELS still lists them)."""
    label = "corrupt"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    try:
        os.replace(path, aside)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            os.replace(wal, aside.with_name(aside.name + ".wal"))
    except OSError as exc:
        raise StoreError(
            f"cannot move {path} aside ({exc.strerror or one_line(exc)}); "
            "move or delete it yourself, then run `gleambrctl index` again"
        ) from exc
    return aside


ASIDE_LABELS = ("old", "corrupt")


def kept_aside(db: Path) -> list[Path]:
    """The index files `set_aside` left beside `db` (their WALs go with them), by name."""
    if not db.parent.is_dir():
        return []
    found = [
        p
        for label in ASIDE_LABELS
        for p in db.parent.glob(f"{db.name}.{label}-*")
        if not p.name.endswith(".wal")
    ]
    return sorted(found)


def storable_text(text: str) -> str:
    """`text` as valid UTF-8: undecodable bytes (surrogate escapes) become `\xff` escapes.

    A file name that is not UTF-8 reaches Python as surrogates, which neither DuckDB nor a
    JSON encoder takes."""
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
