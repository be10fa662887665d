"""Find the `.gleam` files of one package, or of a folder holding several, and read them.

A package is a folder with `gleam.toml`; its modules live under `src/`, `test/` and `dev/`.
`.gitignore` files are honoured at every level (the deepest matching pattern wins, as in
git), hidden files and folders are skipped, `build/` is skipped unless the sources of
dependencies (`build/packages/*/src`) are asked for, and a symlinked folder that leads back
into a folder already walked is reported as a loop instead of being walked forever.

Two kinds of entry are skipped with a reason instead of being walked: a name that is not
valid UTF-8 (no path in the index, a log or a message could hold it), and a symlink that
leads out of the walked folder (`src/pkg/passwd.gleam -> /etc/passwd` would otherwise put
another file's lines into the index, the events and `status`), unless outside links are
asked for.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gbr.core.lazy import lazy_module
from gbr.core.records import FileProblem, SourceFile
from gbr.core.sizes import DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    import pathspec
else:
    # Loaded at the first walk: what imports this module may walk nothing, and pathspec
    # costs 0.1 s.
    pathspec = lazy_module("pathspec")

MODULE_ROOTS = ("src", "test", "dev")
ALWAYS_SKIP = {".git", ".gbr", "node_modules", "_build", "__pycache__", ".venv"}


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A candidate file: where it is, and which package and module it belongs to."""

    abs_path: Path
    path: str  # relative to the walk root, with forward slashes
    module: str
    package: str
    # Reached through a symlink that leads out of the walked folder (--follow-outside-links):
    # its chunks are indexed as asked, but no line of it is quoted in a problem's record.
    outside: bool = False


@dataclass(frozen=True, slots=True)
class HashedFile:
    """A file an earlier pass of the same run read and hashed, without keeping its bytes:
    enough to know it is unchanged, and where to read it again if it is not."""

    found: FoundFile
    content_hash: str

    @property
    def path(self) -> str:
        return self.found.path


Walked = FoundFile | HashedFile | SourceFile | FileProblem


@dataclass
class WalkBegun:
    """A walk begun by a run's no-change check and stopped at the first change: the files
    read and hashed so far, then the rest of the same walk. The run's walker goes on from
    here instead of starting again, so a run walks and hashes the tree once."""

    hashed: list[HashedFile]
    rest: Iterator[Walked]
    _taken: bool = field(default=False, repr=False)

    def take(self) -> Iterator[Walked] | None:
        """The walk, once: a walker restarted after a crash walks afresh (None)."""
        if self._taken:
            return None
        self._taken = True
        return itertools.chain(self.hashed, self.rest)


@dataclass(frozen=True, slots=True)
class WalkOptions:
    include_deps: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    # Relative paths (files or folders) to walk, for a run over the files a watcher saw
    # change; None walks the whole tree.
    only: frozenset[str] | None = None
    # Follow symlinks (to files or folders) that resolve outside the walked folder.
    follow_outside_links: bool = False
    # More patterns to skip, in .gitignore syntax, relative to the walk root (the package's
    # `ignore` setting).
    ignore: tuple[str, ...] = ()


class Scope:
    """The part of the tree a walk restricted to some paths visits, and nothing more.

    The restricted walk goes through the same code as a full one (so `.gitignore`, hidden
    files, `build/` and package names are decided the same way), but it only enters the
    folders on the way to a listed path, so it costs a few `scandir` calls, not a tree walk.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self.targets = frozenset(_clean(p) for p in paths)
        self.whole = "" in self.targets
        self._on_the_way = frozenset(parent for p in self.targets for parent in _parents(p))

    def covers(self, rel: str) -> bool:
        """Whether `rel` is a listed path or lies under a listed folder."""
        rel = _clean(rel)
        return self.whole or rel in self.targets or any(p in self.targets for p in _parents(rel))

    def enters(self, rel_dir: str) -> bool:
        return _clean(rel_dir) in self._on_the_way or self.covers(rel_dir)


def _clean(rel: str) -> str:
    rel = rel.strip().strip("/")
    return "" if rel == "." else rel


def _parents(rel: str) -> Iterator[str]:
    """`src/a/b.gleam` -> `src/a`, `src` (the root itself, "", is left out)."""
    parts = rel.split("/")
    for end in range(len(parts) - 1, 0, -1):
        yield "/".join(parts[:end])


@dataclass(frozen=True, slots=True)
class _Package:
    root: Path
    name: str


def walk(root: Path, options: WalkOptions = WalkOptions()) -> Iterator[FoundFile | FileProblem]:
    """Every `.gleam` file under root in a stable order, or a problem for what can't be walked."""
    root = root.resolve()
    scope = Scope(options.only) if options.only is not None else None
    specs = [(root, pathspec.GitIgnoreSpec.from_lines(options.ignore))] if options.ignore else []
    yield from _walk_dir(
        root, root, specs, _package_at(root) or _Package(root, root.name), options, set(), scope
    )


def _is_file(path: Path) -> bool:
    """`Path.is_file`, but False instead of an exception for a folder we may not enter."""
    try:
        return path.is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _package_at(folder: Path) -> _Package | None:
    manifest = folder / "gleam.toml"
    if not _is_file(manifest):
        return None
    try:
        name = tomllib.loads(manifest.read_text("utf-8")).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        name = None
    return _Package(folder, str(name) if name else folder.name)


def _module_of(file: Path, package: _Package) -> str:
    rel = file.relative_to(package.root)
    parts = rel.parts
    if parts and parts[0] in MODULE_ROOTS and len(parts) > 1:
        parts = parts[1:]
    return "/".join(parts).removesuffix(".gleam")


# `.gbrignore` takes `.gitignore` syntax for what gbr alone should skip (generated code,
# vendored examples); read after `.gitignore`, so its patterns win in the same folder.
IGNORE_FILES = (".gitignore", ".gbrignore")


def _ignore_spec(folder: Path) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        ignore = folder / name
        if not _is_file(ignore):
            continue
        try:
            lines += ignore.read_text("utf-8", errors="replace").splitlines()
        except OSError:
            continue
    if not lines:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:
        return None


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    """As git decides: the deepest `.gitignore` with a matching pattern wins, so a nested
    `!pattern` re-includes what a parent folder's file ignores."""
    for base, spec in reversed(specs):
        rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        decision: bool | None = spec.check_file(rel).include
        if decision is not None:
            return decision
    return False


def _walk_dir(
    folder: Path,
    root: Path,
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]],
    package: _Package,
    options: WalkOptions,
    seen: set[tuple[int, int]],
    scope: Scope | None = None,
    outside: bool = False,
) -> Iterator[FoundFile | FileProblem]:
    try:
        st = folder.stat()
    except OSError as exc:
        yield _os_problem(_rel(folder, root), exc)
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        yield FileProblem(
            path=_rel(folder, root),
            kind="symlink_loop",
            reason="symlink loop: this folder links back to one already walked; skipped",
        )
        return
    seen = seen | {key}
    spec = _ignore_spec(folder)
    if spec is not None:
        specs = [*specs, (folder, spec)]
    package = _package_at(folder) or package
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield _os_problem(_rel(folder, root), exc)
        return
    for entry in entries:
        # Hidden entries are never modules: `.git`, editor lock files (`.#x.gleam`, dangling
        # symlinks) and macOS `._x.gleam` resource forks (binary) among them.
        if entry.name.startswith(".") or entry.name in ALWAYS_SKIP:
            continue
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir and not entry.name.endswith(".gleam"):
            continue
        if is_dir:
            if scope is not None and not scope.enters(_rel(path, root)):
                continue
            if entry.name == "build" and _is_file(folder / "gleam.toml"):
                if options.include_deps:
                    yield from _walk_deps(path / "packages", root, options, seen, scope)
                continue
            if _ignored(path, True, specs):
                continue
            if skipped := _skipped(entry, root, is_dir, options):
                yield skipped
                continue
            yield from _walk_dir(
                path,
                root,
                specs,
                package,
                options,
                seen,
                scope,
                options.follow_outside_links and _outside(entry, root, outside),
            )
        else:
            if scope is not None and not scope.covers(_rel(path, root)):
                continue
            if _ignored(path, False, specs):
                continue
            if skipped := _skipped(entry, root, is_dir, options):
                yield skipped
                continue
            yield FoundFile(
                path,
                _rel(path, root),
                _module_of(path, package),
                package.name,
                options.follow_outside_links and _outside(entry, root, outside),
            )


def _skipped(
    entry: os.DirEntry[str], root: Path, is_dir: bool, options: WalkOptions
) -> FileProblem | None:
    """Why a folder or file that would be walked is skipped instead, if it is."""
    if not _decodable(entry.name):
        return _undecodable(_rel(Path(entry.path), root), is_dir)
    if options.follow_outside_links:
        return None
    return _leaves(entry, root)


def _decodable(name: str) -> bool:
    """False for a name whose bytes are not UTF-8 (Python keeps them as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _undecodable(rel: str, is_dir: bool) -> FileProblem:
    # The path shown and stored spells the bad bytes as `\xff`, so it is valid text.
    shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
    what = (
        "folder name is not valid UTF-8, so its files are skipped; rename it to index them"
        if is_dir
        else "file name is not valid UTF-8; rename it to index it"
    )
    return FileProblem(shown, what, "undecodable_name")


def _outside(entry: os.DirEntry[str], root: Path, folder_outside: bool) -> bool:
    """Whether `entry` resolves outside `root`.

    Only a symlink, or an entry under a folder already found outside, can: resolving every
    path of a large tree would cost a realpath (a syscall per component) for each file.
    """
    try:
        if not (folder_outside or entry.is_symlink()):
            return False
        return not Path(os.path.realpath(entry.path)).is_relative_to(root)
    except (OSError, ValueError):
        return True


def _leaves(entry: os.DirEntry[str], root: Path) -> FileProblem | None:
    """A problem when `entry` is a symlink resolving outside `root`, else None."""
    try:
        if not entry.is_symlink():
            return None
        target = Path(os.path.realpath(entry.path))
    except (OSError, ValueError):
        return None  # unreadable links are reported when read, as before
    if target.is_relative_to(root):
        return None
    what = "folder" if _is_dir(target) else "file"
    return FileProblem(
        _rel(Path(entry.path), root),
        f"symlink to a {what} outside the indexed folder; skipped "
        "(pass --follow-outside-links to index it)",
        "outside_link",
    )


def _walk_deps(
    packages: Path,
    root: Path,
    options: WalkOptions,
    seen: set[tuple[int, int]],
    scope: Scope | None = None,
) -> Iterator[FoundFile | FileProblem]:
    try:
        deps = sorted(p for p in packages.iterdir() if _is_dir(p))
    except FileNotFoundError:
        return  # dependencies not downloaded yet
    except OSError as exc:
        yield _os_problem(_rel(packages, root), exc)
        return
    for dep in deps:
        package = _package_at(dep) or _Package(dep, dep.name)
        src = dep / "src"
        if scope is not None and not scope.enters(_rel(src, root)):
            continue
        if _is_dir(src):
            yield from _walk_dir(src, root, [], package, options, seen, scope)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _os_problem(rel: str, exc: OSError) -> FileProblem:
    if exc.errno == errno.ELOOP:
        return FileProblem(
            rel, "symlink loop: the link points back to itself; fix or remove it", "symlink_loop"
        )
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        return FileProblem(
            rel, "permission denied; make it readable (chmod a+r)", "permission_denied"
        )
    if exc.errno == errno.ENOENT:
        return FileProblem(rel, "broken symlink or file vanished during the walk", "not_found")
    return FileProblem(rel, f"cannot read: {exc.strerror or exc}", "unreadable")


def read_file(found: FoundFile, max_bytes: int = DEFAULT_MAX_BYTES) -> SourceFile | FileProblem:
    """The file's bytes and hash, or why it cannot be indexed. UTF-8 is checked by the parser."""
    try:
        # Non-blocking, so that a FIFO named `x.gleam` cannot hang the walk in open(); the
        # checks then look at what was opened, not at a path that may have changed since.
        fd = os.open(found.abs_path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return FileProblem(
                    found.path,
                    "not a regular file (a FIFO, socket, device or folder); skipped",
                    "special",
                )
            if st.st_size > max_bytes:
                return FileProblem(
                    found.path,
                    f"file is {_size(st.st_size)}, over the {_size(max_bytes)} limit; "
                    "raise it with --max-file-size",
                    "too_large",
                )
            content = handle.read(max_bytes + 1)
    except OSError as exc:
        return _os_problem(found.path, exc)
    if len(content) > max_bytes:
        return FileProblem(
            found.path, f"file grew over the {_size(max_bytes)} limit while read", "too_large"
        )
    if b"\0" in content[:8192]:
        return FileProblem(
            found.path, "binary content (NUL bytes), not Gleam source; skipped", "binary"
        )
    return SourceFile(
        path=found.path,
        module=found.module,
        package=found.package,
        content=content,
        content_hash=hashlib.sha256(content).hexdigest(),
        size=len(content),
        mtime=st.st_mtime,
        outside=found.outside,
    )


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.1f} kB"
    return f"{n} bytes"
