"""Finding and reading `.gleam` files on a real file system."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pathspec
import pytest

import gbr
from gbr.core.parse.walker import FoundFile, WalkOptions, read_file, walk
from gbr.core.records import FileProblem, SourceFile
from tests.conftest import write_tree

MakePackage = Callable[..., Path]
SETPRIV = "/usr/bin/setpriv"
NOBODY = 65534


def found(root: Path, options: WalkOptions | None = None) -> list[FoundFile]:
    items = list(walk(root, options or WalkOptions()))
    problems = [i for i in items if isinstance(i, FileProblem)]
    assert not problems, problems
    return [i for i in items if isinstance(i, FoundFile)]


def paths(root: Path, options: WalkOptions | None = None) -> list[str]:
    return [f.path for f in found(root, options)]


write = write_tree


def found_file(root: Path, rel: str) -> FoundFile:
    return FoundFile(root / rel, rel, rel.removesuffix(".gleam"), "pkg")


# --- modules and packages ------------------------------------------------------------------


def test_module_paths_drop_the_src_test_and_dev_roots(make_package: MakePackage) -> None:
    root = make_package(
        {
            "src/gleam/list.gleam": "",
            "src/app.gleam": "",
            "test/foo_test.gleam": "",
            "dev/tool.gleam": "",
        }
    )
    modules = {f.path: f.module for f in found(root)}
    assert modules == {
        "dev/tool.gleam": "tool",
        "src/app.gleam": "app",
        "src/gleam/list.gleam": "gleam/list",
        "test/foo_test.gleam": "foo_test",
    }


def test_found_files_carry_absolute_paths_and_forward_slashes(make_package: MakePackage) -> None:
    root = make_package({"src/a/b/c.gleam": ""})
    (item,) = found(root)
    assert item.abs_path == root.resolve() / "src" / "a" / "b" / "c.gleam"
    assert item.path == "src/a/b/c.gleam"


def test_package_name_comes_from_gleam_toml(tmp_path: Path) -> None:
    root = write(
        tmp_path / "folder_name",
        {"gleam.toml": 'name = "real_name"\nversion = "1.0.0"\n', "src/x.gleam": ""},
    )
    assert {f.package for f in found(root)} == {"real_name"}


def test_a_broken_gleam_toml_falls_back_to_the_folder_name(tmp_path: Path) -> None:
    root = write(tmp_path / "fallback", {"gleam.toml": "name = = nope\n", "src/x.gleam": ""})
    assert {f.package for f in found(root)} == {"fallback"}


def test_a_folder_of_several_packages(tmp_path: Path) -> None:
    root = write(
        tmp_path / "mono",
        {
            "alpha/gleam.toml": 'name = "alpha"\n',
            "alpha/src/alpha.gleam": "",
            "alpha/src/alpha/util.gleam": "",
            "beta/gleam.toml": 'name = "beta"\n',
            "beta/src/beta.gleam": "",
            "beta/test/beta_test.gleam": "",
        },
    )
    got = [(f.path, f.package, f.module) for f in found(root)]
    assert got == [  # depth first, by entry name: folder `alpha` sorts before `alpha.gleam`
        ("alpha/src/alpha/util.gleam", "alpha", "alpha/util"),
        ("alpha/src/alpha.gleam", "alpha", "alpha"),
        ("beta/src/beta.gleam", "beta", "beta"),
        ("beta/test/beta_test.gleam", "beta", "beta_test"),
    ]


def test_the_example_package_is_found_whole() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "bookshelf"
    items = found(example)
    assert {f.package for f in items} == {"bookshelf"}
    assert "src/bookshelf/broken.gleam" in [f.path for f in items]
    assert next(f.module for f in items if f.path == "src/bookshelf/worker.gleam") == (
        "bookshelf/worker"
    )


# --- what is skipped -----------------------------------------------------------------------


def test_gitignore_at_the_root_is_honoured(make_package: MakePackage) -> None:
    root = make_package(
        {
            ".gitignore": "src/generated/\n*_tmp.gleam\n",
            "src/kept.gleam": "",
            "src/scratch_tmp.gleam": "",
            "src/generated/schema.gleam": "",
        }
    )
    assert paths(root) == ["src/kept.gleam"]


def test_nested_gitignore_is_honoured_relative_to_its_folder(make_package: MakePackage) -> None:
    root = make_package(
        {
            "src/sub/.gitignore": "skip_me.gleam\n/local.gleam\n",
            "src/sub/skip_me.gleam": "",
            "src/sub/local.gleam": "",
            "src/sub/deeper/local.gleam": "",
            "src/skip_me.gleam": "",
        }
    )
    assert paths(root) == ["src/skip_me.gleam", "src/sub/deeper/local.gleam"]


def test_a_nested_gitignore_can_re_include_what_the_root_ignores(
    make_package: MakePackage,
) -> None:
    root = make_package(
        {
            ".gitignore": "*_gen.gleam\n",
            "src/keep/.gitignore": "!special_gen.gleam\n",
            "src/keep/special_gen.gleam": "",
            "src/keep/other_gen.gleam": "",
            "src/top_gen.gleam": "",
        }
    )
    assert paths(root) == ["src/keep/special_gen.gleam"]


def test_build_is_skipped_by_default(make_package: MakePackage) -> None:
    root = make_package(
        {
            "src/app.gleam": "",
            "build/dev/erlang/app/_gleam_artefacts/app.gleam": "",
            "build/packages/dep/gleam.toml": 'name = "dep"\n',
            "build/packages/dep/src/dep.gleam": "",
        }
    )
    assert paths(root) == ["src/app.gleam"]


def test_dependency_sources_are_walked_when_asked(make_package: MakePackage) -> None:
    root = make_package(
        {
            ".gitignore": "build\n",
            "src/app.gleam": "",
            "build/dev/erlang/app/_gleam_artefacts/app.gleam": "",
            "build/packages/dep/gleam.toml": 'name = "dep_pkg"\n',
            "build/packages/dep/src/dep.gleam": "",
            "build/packages/dep/src/dep/inner.gleam": "",
            "build/packages/dep/test/dep_test.gleam": "",
        }
    )
    got = [(f.path, f.package, f.module) for f in found(root, WalkOptions(include_deps=True))]
    assert got == [
        ("build/packages/dep/src/dep/inner.gleam", "dep_pkg", "dep/inner"),
        ("build/packages/dep/src/dep.gleam", "dep_pkg", "dep"),
        ("src/app.gleam", "pkg", "app"),
    ]


def test_include_deps_without_downloaded_deps_is_quiet(make_package: MakePackage) -> None:
    root = make_package({"src/app.gleam": "", "build/dev/x.txt": ""})
    assert paths(root, WalkOptions(include_deps=True)) == ["src/app.gleam"]


def test_hidden_folders_and_files_are_skipped(make_package: MakePackage) -> None:
    root = make_package(
        {
            ".hidden/x.gleam": "",
            "src/.cache/y.gleam": "",
            "src/._resource_fork.gleam": b"\x00\x05\x16\x07",
            "src/visible.gleam": "",
        }
    )
    (root / "src" / ".#visible.gleam").symlink_to("root@host.1234")  # an editor lock file
    assert paths(root) == ["src/visible.gleam"]


def test_non_gleam_files_are_ignored(make_package: MakePackage) -> None:
    root = make_package({"src/app.gleam": "", "src/app_ffi.erl": "", "src/notes.md": ""})
    assert paths(root) == ["src/app.gleam"]


def test_the_order_is_stable_and_sorted(make_package: MakePackage) -> None:
    root = make_package(
        {"src/zeta.gleam": "", "src/alpha.gleam": "", "src/mid/b.gleam": "", "test/a.gleam": ""}
    )
    first = paths(root)
    assert first == ["src/alpha.gleam", "src/mid/b.gleam", "src/zeta.gleam", "test/a.gleam"]
    assert paths(root) == first


# --- links and loops -----------------------------------------------------------------------


def test_a_folder_symlink_back_to_its_parent_is_a_loop_and_the_walk_ends(
    make_package: MakePackage,
) -> None:
    root = make_package({"src/app/one.gleam": "", "src/two.gleam": ""})
    (root / "src" / "app" / "loop").symlink_to("..", target_is_directory=True)
    items = list(walk(root))
    problems = [i for i in items if isinstance(i, FileProblem)]
    assert [(p.path, p.kind) for p in problems] == [("src/app/loop", "symlink_loop")]
    assert [i.path for i in items if isinstance(i, FoundFile)] == [
        "src/app/one.gleam",
        "src/two.gleam",
    ]


def test_a_symlinked_folder_elsewhere_is_walked_only_when_asked(
    make_package: MakePackage, tmp_path: Path
) -> None:
    shared = write(tmp_path / "shared", {"util.gleam": ""})
    root = make_package({"src/app.gleam": ""})
    (root / "src" / "shared").symlink_to(shared, target_is_directory=True)
    items = list(walk(root))
    assert [i.path for i in items if isinstance(i, FoundFile)] == ["src/app.gleam"]
    assert [(p.path, p.kind) for p in items if isinstance(p, FileProblem)] == [
        ("src/shared", "outside_link")
    ]
    assert [(f.path, f.module) for f in found(root, WalkOptions(follow_outside_links=True))] == [
        ("src/app.gleam", "app"),
        ("src/shared/util.gleam", "shared/util"),
    ]


def test_a_file_symlink_to_itself_is_a_loop_when_read(make_package: MakePackage) -> None:
    root = make_package({"src/ok.gleam": "pub fn ok() { 1 }\n"})
    (root / "src" / "a.gleam").symlink_to("a.gleam")
    items = list(walk(root))
    looped = next(i for i in items if i.path == "src/a.gleam")
    assert isinstance(looped, FoundFile)
    problem = read_file(looped)
    assert isinstance(problem, FileProblem)
    assert problem.kind == "symlink_loop"
    assert "loop" in problem.reason


def test_a_broken_symlink_is_a_problem_not_an_exception(make_package: MakePackage) -> None:
    root = make_package({"src/ok.gleam": ""})
    (root / "src" / "gone.gleam").symlink_to("nowhere.gleam")
    gone = next(i for i in walk(root) if i.path == "src/gone.gleam")
    assert isinstance(gone, FoundFile)
    problem = read_file(gone)
    assert isinstance(problem, FileProblem)
    assert problem.kind == "not_found"
    assert "symlink" in problem.reason


def test_a_missing_root_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    items = list(walk(tmp_path / "does_not_exist"))
    assert len(items) == 1
    assert isinstance(items[0], FileProblem)
    assert items[0].kind == "not_found"


# --- reading -------------------------------------------------------------------------------


def test_read_file_returns_bytes_hash_and_identity(make_package: MakePackage) -> None:
    content = 'pub fn hi() {\n  "héllo"\n}\n'
    root = make_package({"src/hi.gleam": content})
    (item,) = found(root)
    source = read_file(item)
    assert isinstance(source, SourceFile)
    assert source.content == content.encode()
    assert source.size == len(content.encode())
    assert len(source.content_hash) == 64
    assert (source.path, source.module, source.package) == ("src/hi.gleam", "hi", "pkg")
    assert source.mtime == (root / "src" / "hi.gleam").stat().st_mtime


def test_same_content_same_hash_different_content_different_hash(
    make_package: MakePackage,
) -> None:
    root = make_package({"src/a.gleam": "x", "src/b.gleam": "x", "src/c.gleam": "y"})
    hashes = [s.content_hash for s in map(read_file, found(root)) if isinstance(s, SourceFile)]
    assert hashes[0] == hashes[1] != hashes[2]


def test_a_too_large_file_is_refused_with_its_size_and_the_fix(make_package: MakePackage) -> None:
    root = make_package({"src/big.gleam": "x" * 2048})
    (item,) = found(root)
    problem = read_file(item, max_bytes=1000)
    assert isinstance(problem, FileProblem)
    assert problem.kind == "too_large"
    assert "2.0 kB" in problem.reason
    assert "1.0 kB" in problem.reason
    assert "--max-file-size" in problem.reason
    assert isinstance(read_file(item, max_bytes=2048), SourceFile)


def test_binary_content_is_refused(make_package: MakePackage) -> None:
    root = make_package({"src/blob.gleam": b"pub fn a() {}\n\x00\x01\x02garbage"})
    (item,) = found(root)
    problem = read_file(item)
    assert isinstance(problem, FileProblem)
    assert problem.kind == "binary"
    assert "NUL" in problem.reason


def test_a_fifo_is_refused_without_blocking(make_package: MakePackage) -> None:
    root = make_package({})
    os.mkfifo(root / "pipe.gleam")
    item = found_file(root, "pipe.gleam")
    result: list[SourceFile | FileProblem] = []
    reader = threading.Thread(target=lambda: result.append(read_file(item)), daemon=True)
    reader.start()
    reader.join(60)  # a guard against a hang, not a speed check: it returns at once
    assert result, "read_file blocked on a FIFO"
    assert isinstance(result[0], FileProblem)
    assert result[0].kind == "special"


# --- permissions ---------------------------------------------------------------------------
# Tests run as root (in CI too), and root reads mode-000 files. So the check runs in a child
# process that drops to `nobody` with setpriv. The child gets its own copy of the walker
# sources and of pathspec in a world-readable folder, so that it works wherever the repo and
# the venv live; only the interpreter must be runnable by nobody.

_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from gbr.core.parse.walker import FoundFile, read_file, walk
root = Path(sys.argv[2])
result = read_file(FoundFile(root / "src" / "secret.gleam", "src/secret.gleam", "secret", "p"))
walked = [[item.path, getattr(item, "kind", "found")] for item in walk(root)]
print(json.dumps({"read": getattr(result, "kind", "read"), "walk": walked}))
"""


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A folder under /tmp that uid 65534 can enter (pytest's tmp_path is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="gbr-perm-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def _copy_sources(lib: Path) -> None:
    gbr_dir = Path(gbr.__file__).parent
    (lib / "gbr" / "core" / "parse").mkdir(parents=True)
    shutil.copy(gbr_dir / "__init__.py", lib / "gbr" / "__init__.py")
    for name in ("parse/walker.py", "records.py", "lazy.py", "sizes.py"):
        shutil.copy(gbr_dir / "core" / name, lib / "gbr" / "core" / name)
    shutil.copytree(Path(pathspec.__file__).parent, lib / "pathspec")
    for path in [lib, *lib.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _as_nobody(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _nobody_python() -> str:
    """An interpreter (3.11+, for tomllib) that uid 65534 can run."""
    for candidate in (sys.executable, shutil.which("python3.11"), "/usr/bin/python3"):
        if candidate and _as_nobody([candidate, "-c", "import tomllib"]).returncode == 0:
            return candidate
    pytest.fail("no Python 3.11+ interpreter is runnable by uid 65534")


def _permission_check(base: Path) -> dict[str, object]:
    lib = base / "lib"
    _copy_sources(lib)
    root = write(
        base / "pkg",
        {
            "gleam.toml": 'name = "pkg"\n',
            "src/secret.gleam": "pub fn s() { 1 }\n",
            "src/open.gleam": "pub fn o() { 1 }\n",
            "src/locked/inner.gleam": "",
        },
    )
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (root / "src" / "secret.gleam").chmod(0o000)
    (root / "src" / "locked").chmod(0o000)
    if os.geteuid() != 0:
        # Not root: the current user is already denied, no need to switch.
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, str(lib), str(root)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    else:
        result = _as_nobody([_nobody_python(), "-c", _CHILD, str(lib), str(root)])
        assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_permission_denied_is_a_problem_for_files_and_folders(world_readable_dir: Path) -> None:
    report = _permission_check(world_readable_dir)
    assert report["read"] == "permission_denied"
    assert report["walk"] == [
        ["src/locked", "permission_denied"],
        ["src/open.gleam", "found"],
        ["src/secret.gleam", "found"],
    ]
