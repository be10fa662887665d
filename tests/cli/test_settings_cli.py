"""Settings that stick per package: remembered --include-deps, .gbrignore, k, mode, ignore."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CTL, PROVIDER_VARS, write_tree

LIB = """
/// Add two numbers together.
pub fn add(a: Int, b: Int) -> Int {
  a + b
}

/// Subtract the second number from the first.
pub fn subtract(a: Int, b: Int) -> Int {
  a - b
}

/// Multiply two numbers.
pub fn multiply(a: Int, b: Int) -> Int {
  a * b
}
"""
DEP = """
/// Turn a list of strings into one string with commas between them.
pub fn join_with_commas(items: List(String)) -> String {
  todo
}
"""
GENERATED = """
/// Generated: do not edit.
pub fn generated_lookup_table() -> List(Int) {
  [1, 2, 3]
}
"""


def gbr(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [CTL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "calc",
        {
            "gleam.toml": 'name = "calc"\nversion = "1.0.0"\n',
            "src/calc.gleam": LIB,
            "src/generated/table.gleam": GENERATED,
            "build/packages/strs/gleam.toml": 'name = "strs"\nversion = "1.0.0"\n',
            "build/packages/strs/src/strs.gleam": DEP,
        },
    )


def summary(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_include_deps_is_remembered_so_a_plain_index_keeps_the_dependencies(
    package: Path,
) -> None:
    first = gbr("index", ".", "--include-deps", "--json", cwd=package)
    assert summary(first)["files_seen"] == 3
    assert "include_deps = true is remembered in" in first.stderr
    again = summary(gbr("index", ".", "--json", cwd=package))
    assert again["files_removed"] == 0 and again["files_unchanged"] == 3
    status = gbr("status", cwd=package)
    assert "settings include_deps = True" in status.stdout
    assert summary(gbr("status", "--json", cwd=package))["settings"] == {"include_deps": True}
    # --no-include-deps is remembered too, and the dependency leaves the index.
    off = summary(gbr("index", ".", "--no-include-deps", "--json", cwd=package))
    assert off["files_removed"] == 1
    assert summary(gbr("index", ".", "--json", cwd=package))["files_seen"] == 2


def test_gbrignore_and_the_ignore_setting_skip_files(package: Path) -> None:
    (package / ".gbrignore").write_text("src/generated/\n")
    assert summary(gbr("index", ".", "--json", cwd=package))["files_seen"] == 1
    (package / ".gbrignore").unlink()
    assert summary(gbr("index", ".", "--json", cwd=package))["files_seen"] == 2
    assert gbr("settings", "ignore", "src/generated/,*_test.gleam", cwd=package).returncode == 0
    data = summary(gbr("index", ".", "--json", cwd=package))
    assert data["files_seen"] == 1 and data["files_removed"] == 1


def test_search_takes_k_and_mode_from_the_settings_and_a_flag_wins(package: Path) -> None:
    summary(gbr("index", ".", "--json", cwd=package))
    assert gbr("settings", "k", "2", cwd=package).returncode == 0
    assert gbr("settings", "mode", "bm25", cwd=package).returncode == 0
    hits = summary(gbr("search", "add two numbers", "--json", cwd=package))
    assert hits["mode"] == "bm25" and len(hits["results"]) == 2
    flags = summary(
        gbr("search", "add two numbers", "--json", "-k", "3", "--mode", "dense", cwd=package)
    )
    assert flags["mode"] == "dense" and len(flags["results"]) == 3
    shown = summary(gbr("settings", "--json", cwd=package))
    assert shown["settings"] == {"k": 2, "mode": "bm25"}
    assert gbr("settings", "k", "--unset", cwd=package).returncode == 0
    assert summary(gbr("settings", "--json", cwd=package))["settings"] == {"mode": "bm25"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("settings", "k", "zero"), "error: k must be a whole number from 1 to 200, not 'zero'"),
        (("settings", "colour", "red"), "error: unknown setting 'colour'; use one of"),
        (("settings", "k", "3", "--unset"), "error: --unset takes a KEY and no value"),
    ],
)
def test_bad_settings_are_one_line_and_change_nothing(
    package: Path, args: tuple[str, ...], message: str
) -> None:
    result = gbr(*args, cwd=package)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
    assert not (package / ".gbr" / "settings.toml").exists()


def test_a_hand_broken_settings_file_is_one_line_with_the_fix(package: Path) -> None:
    (package / ".gbr").mkdir()
    (package / ".gbr" / "settings.toml").write_text("mode = 'fuzzy'\n")
    result = gbr("index", ".", cwd=package)
    assert result.returncode == 2
    assert "settings.toml: mode must be hybrid or dense or bm25, not 'fuzzy'" in result.stderr


def test_a_package_without_gleam_files_is_warned_about(tmp_path: Path) -> None:
    empty = write_tree(tmp_path / "empty", {"gleam.toml": 'name = "empty"\n', "README.md": "x"})
    result = gbr("index", ".", cwd=empty)
    assert result.returncode == 0, result.stderr
    assert "warning: no .gleam files under " in result.stderr


def test_the_tests_setting_applies_to_search_and_a_flag_wins(package: Path) -> None:
    write_tree(package, {"test/calc_test.gleam": "pub fn add_two_numbers_test() {\n  todo\n}\n"})
    summary(gbr("index", ".", "--json", cwd=package))
    query = ("add two numbers test", "--json", "-k", "5", "--mode", "bm25")
    default = summary(gbr("search", *query, cwd=package))["results"]
    assert any(hit["path"].startswith("test/") for hit in default)
    assert gbr("settings", "tests", "exclude", cwd=package).returncode == 0
    excluded = summary(gbr("search", *query, cwd=package))["results"]
    assert excluded and not any(hit["path"].startswith("test/") for hit in excluded)
    flag = summary(gbr("search", *query, "--tests", "include", cwd=package))["results"]
    assert any(hit["path"].startswith("test/") for hit in flag)
