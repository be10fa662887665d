"""A walk restricted to some paths decides each file exactly as a full walk would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gbr.core.parse.walker import FoundFile, Scope, WalkOptions, walk
from gbr.core.records import FileProblem

MakePackage = Callable[..., Path]


def walked(root: Path, only: set[str] | None = None, **options: bool) -> list[FoundFile]:
    scope = frozenset(only) if only is not None else None
    items = list(walk(root, WalkOptions(only=scope, **options)))
    assert not [i for i in items if isinstance(i, FileProblem)]
    return [i for i in items if isinstance(i, FoundFile)]


@pytest.fixture
def tree(make_package: MakePackage) -> Path:
    return make_package(
        {
            ".gitignore": "src/generated/\n",
            "src/app.gleam": "",
            "src/app/router.gleam": "",
            "src/app/web/page.gleam": "",
            "src/generated/code.gleam": "",
            "test/app_test.gleam": "",
            "build/packages/dep/gleam.toml": 'name = "dep"\n',
            "build/packages/dep/src/dep.gleam": "",
        }
    )


def test_only_the_listed_files_are_walked_with_the_same_module_names(tree: Path) -> None:
    full = {f.path: f for f in walked(tree)}
    some = walked(tree, {"src/app/router.gleam", "test/app_test.gleam"})
    assert [f.path for f in some] == ["src/app/router.gleam", "test/app_test.gleam"]
    assert all(f == full[f.path] for f in some)


def test_a_listed_folder_is_walked_whole(tree: Path) -> None:
    assert [f.path for f in walked(tree, {"src/app"})] == [
        "src/app/router.gleam",
        "src/app/web/page.gleam",
    ]


def test_ignored_and_vanished_paths_are_not_found(tree: Path) -> None:
    listed = {"src/generated/code.gleam", "src/gone.gleam", "build/packages/dep/src/dep.gleam"}
    assert walked(tree, listed) == []


def test_dependency_sources_follow_include_deps(tree: Path) -> None:
    found = walked(tree, {"build/packages/dep/src/dep.gleam"}, include_deps=True)
    assert [(f.path, f.module, f.package) for f in found] == [
        ("build/packages/dep/src/dep.gleam", "dep", "dep")
    ]


def test_the_root_itself_means_everything(tree: Path) -> None:
    assert walked(tree, {"."}) == walked(tree)


def test_scope_covers_listed_paths_and_what_lies_under_listed_folders() -> None:
    scope = Scope({"src/a.gleam", "test/"})
    assert scope.covers("src/a.gleam") and scope.covers("test/x/y.gleam")
    assert not scope.covers("src/b.gleam") and not scope.covers("src")
    assert scope.enters("src") and scope.enters("test/x")
    assert not scope.enters("dev")
