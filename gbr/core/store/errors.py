"""DuckDB's errors, translated at the store's boundary into gbr's own (gbr.core.errors).

Callers of `Store` catch only `StoreError` and its children: a damaged file becomes an
`IndexCorruptError`, a write the disk refused a `StoreWriteError`, and anything else a
`StoreError`, each one line that ends with the fix, chained to DuckDB's error with `from`
so `--debug` still shows it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import duckdb

from gbr.core.errors import IndexCorruptError, StoreError, StoreWriteError

P = ParamSpec("P")
R = TypeVar("R")


class _HasPath(Protocol):
    @property
    def path(self) -> Path: ...


S = TypeVar("S", bound=_HasPath)


def guarded(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A public store method whose DuckDB errors leave it as our own (see `store_error`)."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except duckdb.Error as exc:
            raise store_error(self.path, exc) from exc

    return wrapper


def store_error(path: Path, exc: BaseException) -> StoreError:
    """The one-line error for any failure of the index at `path`: damage, a refused write,
    or else a query that failed, with what to do about each."""
    bad = damaged(exc, path)
    if bad is not None:
        return bad
    if is_write_failure(exc):
        return write_error(path, exc)
    return StoreError(
        f"the index {path} failed: {one_line(exc)}; run again with --debug to see why, "
        f"and run `{rebuild_command(path)}` if it keeps failing"
    )


def is_write_failure(exc: BaseException) -> bool:
    """An error that says the disk refused (not a bug in a query): worth one line, not a trace."""
    return isinstance(exc, OSError | duckdb.IOException | duckdb.OutOfMemoryException) or (
        isinstance(exc, duckdb.Error) and _cause_fix(str(exc)) is not None
    )


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a write refused by the disk into a StoreWriteError; other errors pass through."""
    try:
        yield
    except (duckdb.Error, OSError) as exc:
        if is_write_failure(exc):
            raise write_error(path, exc) from exc
        raise


_FIXES = (
    (
        ("permission denied", "operation not permitted", "read-only file system"),
        "make {folder} writable, or pass --db with a file in a folder you can write",
    ),
    (("no space left", "disk quota"), "free space on the drive that holds {folder}"),
    (
        ("too many open files",),
        "close other programs or raise the open-file limit (ulimit -n), then try again",
    ),
)


def _cause_fix(message: str) -> str | None:
    lowered = message.lower()
    for needles, fix in _FIXES:
        if any(n in lowered for n in needles):
            return fix
    return None


def write_error(path: Path, exc: BaseException) -> StoreWriteError | IndexCorruptError:
    """The one line for a failed write: the cause as the system said it, then the fix.

    A write that failed on a damaged block (a commit reads blocks too) is damage, not a
    refusal that may pass: the daemon would retry it for ever, telling the user to check
    the disk's permissions instead of rebuilding the file.
    """
    bad = damaged(exc, path)
    if bad is not None:
        return bad
    cause = one_line(exc)
    for prefix in ("TransactionContext Error: ", "Failed to commit: ", "IO Error: "):
        cause = cause.removeprefix(prefix)
    fix = _cause_fix(cause) or "check the disk and the permissions of {folder}, then run again"
    return StoreWriteError(
        f"cannot write the index {path}: {cause}; " + fix.format(folder=path.parent)
    )


# DuckDB's words for a file it cannot trust: a block whose checksum fails, a header that
# is not DuckDB's, and a file shorter than its own block list says.
_DAMAGE = (
    (re.compile(r"Corrupt database file.*?(in block at location \d+)"), "checksum mismatch {0}"),
    (re.compile(r"not a valid DuckDB database file"), "not a valid DuckDB database file"),
    (re.compile(r"Could not read enough bytes"), "the file is shorter than it should be"),
)


def damaged(exc: BaseException, path: Path) -> IndexCorruptError | None:
    """The one-line error for a damaged index file, if `exc` (or its cause) says so.

    Locks, permissions and full disks are not damage: they give None, and the file is
    never moved aside for them.
    """
    seen: BaseException | None = exc
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        if isinstance(seen, IndexCorruptError):
            return seen
        text = str(seen)
        for pattern, detail in _DAMAGE:
            found = pattern.search(text)
            if found:
                what = detail.format(*found.groups())
                return IndexCorruptError(
                    f"the index {path} is damaged ({what}); run `{rebuild_command(path)}` "
                    "to recreate it from the source tree (the damaged file is kept aside)",
                    detail=what,
                )
        seen = seen.__cause__ or seen.__context__
    return None


def rebuild_command(db: Path) -> str:
    if db.name == "index.duckdb" and db.parent.name == ".gbr":
        return f"gleambrctl index --rebuild {db.parent.parent}"
    return f"gleambrctl index --rebuild --db {db} PATH"


def one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
