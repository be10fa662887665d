"""The upward search for an index stops where it should; `index` knows a wide folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gbr.core.errors import ConfigError
from gbr.core.paths import (
    CEILING_ENV,
    PACKAGE_DEPTH,
    ceilings,
    find_index,
    search_folders,
    wide_folder,
)


def plant_index(folder: Path) -> Path:
    """An index file where the search would look (its content does not matter here)."""
    db = folder / ".gbr" / "index.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"planted")
    return db


def test_the_search_finds_the_nearest_index_up_to_the_package_root(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "src" / "deep").mkdir(parents=True)
    (pkg / "gleam.toml").write_text('name = "pkg"\n')
    env = {CEILING_ENV: str(tmp_path.parent)}
    own = plant_index(pkg)
    assert find_index(pkg / "src" / "deep", env) == own


def test_the_search_stops_at_the_package_root(tmp_path: Path) -> None:
    """An index above the package (someone indexed the parent folder) is not this one's."""
    plant_index(tmp_path)
    pkg = tmp_path / "pkg"
    (pkg / "src").mkdir(parents=True)
    (pkg / "gleam.toml").write_text('name = "pkg"\n')
    env = {CEILING_ENV: str(tmp_path.parent)}
    assert list(search_folders(pkg / "src", env)) == [pkg / "src", pkg]
    with pytest.raises(ConfigError, match=r"up to .*pkg; run `gleambrctl index PATH`"):
        find_index(pkg / "src", env)


def test_an_index_above_a_ceiling_is_not_found(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    start = outer / "empty" / "folder"
    start.mkdir(parents=True)
    plant_index(outer)
    assert find_index(start, {}) == outer / ".gbr" / "index.duckdb"  # no ceiling: found
    env = {CEILING_ENV: f"/nonexistent:relative/ignored:{outer}"}
    with pytest.raises(ConfigError, match="no index found from here up to"):
        find_index(start, env)
    # The start folder itself is always looked at, even when it is a ceiling.
    assert find_index(outer, env) == outer / ".gbr" / "index.duckdb"


def test_home_and_the_filesystem_root_are_ceilings(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start = home / "projects" / "scratch"
    start.mkdir(parents=True)
    plant_index(tmp_path)  # above home: never reached
    env = {"HOME": str(home)}
    assert ceilings(env) >= {Path("/"), home}
    assert list(search_folders(start, env)) == [start, home / "projects"]
    assert list(search_folders(home, env)) == [home]
    assert list(search_folders(Path("/"), env)) == [Path("/")]


def test_the_search_stops_at_a_filesystem_boundary() -> None:
    # /proc is its own filesystem: the search from inside it never looks at `/`.
    assert list(search_folders(Path("/proc/sys"), {})) == [Path("/proc/sys"), Path("/proc")]


def test_wide_folders_are_named(
    tmp_path: Path, make_package: Callable[[dict[str, str | bytes]], Path]
) -> None:
    env = {"HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    assert wide_folder(Path("/"), env) == "/ is the filesystem root"
    assert wide_folder(tmp_path / "home", env) == f"{tmp_path / 'home'} is your home folder"
    empty = tmp_path / "empty"
    (empty / "a" / "b").mkdir(parents=True)
    assert wide_folder(empty, env) == f"{empty} holds no gleam.toml within {PACKAGE_DEPTH} levels"
    pkg = make_package({"src/x.gleam": "pub fn x() { 1 }\n"})
    assert wide_folder(pkg, env) is None
    assert wide_folder(tmp_path, env) is None  # a folder of packages is fine
    too_deep = tmp_path / "deep" / "a" / "b" / "c" / "d"
    too_deep.mkdir(parents=True)
    (too_deep / "gleam.toml").write_text('name = "d"\n')
    assert wide_folder(tmp_path / "deep", env) is not None
    (too_deep.parent / "gleam.toml").write_text('name = "c"\n')
    assert wide_folder(tmp_path / "deep", env) is None
