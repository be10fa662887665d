"""`--tests include|demote|exclude` on `search` and `ask`, end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run, run_json
from tests.conftest import Indexed

QUERY = "parse an isbn and check the round trip"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    return indexed_small_template.copy(tmp_path_factory.mktemp("flag") / "small")


def paths(data: dict) -> list[str]:
    return [r["path"] for r in data["results"]]


def test_search_include_and_exclude(small: Path) -> None:
    included = run_json("search", QUERY, "-k", "40", "--tests", "include", cwd=small)
    assert any(p.startswith("test/") for p in paths(included))
    excluded = run_json("search", QUERY, "-k", "40", "--tests", "exclude", cwd=small)
    assert excluded["results"] and not [p for p in paths(excluded) if p.startswith("test/")]


def test_search_demotes_tests_by_default(small: Path) -> None:
    default = run_json("search", QUERY, "-k", "40", cwd=small)
    demoted = run_json("search", QUERY, "-k", "40", "--tests", "demote", cwd=small)
    assert paths(default) == paths(demoted)
    included = run_json("search", QUERY, "-k", "40", "--tests", "include", cwd=small)
    first_test = paths(included).index("test/isbn_test.gleam")
    assert paths(demoted).index("test/isbn_test.gleam") > first_test


def test_search_stdin_honours_the_flag(small: Path) -> None:
    result = run("search", "-", "--tests", "exclude", "-k", "40", cwd=small, stdin=QUERY + "\n")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.splitlines()[0])
    assert data["results"] and not [p for p in paths(data) if p.startswith("test/")]


def test_ask_dry_run_excludes_tests_from_the_context(small: Path) -> None:
    result = run("ask", QUERY, "--dry-run", "--json", "--tests", "exclude", cwd=small)
    assert result.returncode == 0, result.stderr
    chunks = json.loads(result.stdout)["chunks"]
    assert chunks and not [c for c in chunks if c["path"].startswith("test/")]


@pytest.mark.parametrize("command", [["search", QUERY], ["ask", QUERY, "--dry-run"]])
def test_an_unknown_policy_is_one_line_with_the_choices(small: Path, command: list[str]) -> None:
    result = run(*command, "--tests", "hide", cwd=small)
    assert result.returncode == 2
    assert "unknown --tests 'hide'; use one of include, demote, exclude" in result.stderr
    assert "Traceback" not in result.stderr
