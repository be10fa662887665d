"""The CLI behaves like the tools people already use: --version, -h, completion, plain help,
the same -k/--top everywhere, one-line errors when piped, hints for empty filters, output
for editors and scripts (vimgrep lines, a stamped --json)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gbr import __version__
from gbr.cli import app
from tests.conftest import CTL, PROVIDER_VARS, Indexed

COMMANDS = ("index", "search", "ask", "chat", "status", "serve", "mcp")


def run(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """As a script runs it: pipes, no COLUMNS, no provider keys."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", *PROVIDER_VARS)}
    return subprocess.run(
        [CTL, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        timeout=300,
    )


def help_of(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "-h"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    """Five files of the example, indexed once per session, for the read-only tests."""
    return indexed_small_template.copy(tmp_path_factory.mktemp("conventions") / "small")


# ----------------------------------------------------------------- item 5: conventions


def test_version_prints_the_version_and_exits_0() -> None:
    result = run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"gleambrctl {__version__}"


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_dash_h_is_help_on_every_command_and_flags_show_no_bool_type(command: str) -> None:
    text = help_of(*([command] if command else []))
    assert "Usage: gleambrctl" in text and "-h, --help" in text
    assert "<bool>" not in text and "BOOLEAN" not in text


@pytest.mark.parametrize("command", ["search", "ask", "chat"])
def test_search_ask_and_chat_take_the_same_k_and_top(command: str) -> None:
    assert "-k, --top" in help_of(command)


def test_chat_takes_the_answering_flags_of_ask() -> None:
    chat, ask = help_of("chat"), help_of("ask")
    for flag in ("--rerank / --no-rerank", "--hyde / --no-hyde", "--budget"):
        assert flag in chat and flag in ask


def test_completion_script_for_bash_prints_offline_and_completes_commands() -> None:
    # Typer guesses the shell from the parent processes, which differ under CI; with the
    # guess off (typer's own switch for tests), the shell is the option's value.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = subprocess.run(
        [CTL, "--show-completion", "bash"], env=env, capture_output=True, text=True, timeout=60
    )
    assert script.returncode == 0, script.stderr
    assert "_GLEAMBRCTL_COMPLETE=complete_bash" in script.stdout
    assert "complete -o default -F _gleambrctl_completion gleambrctl" in script.stdout
    # What bash runs on <TAB> after `gleambrctl se`: the script's own protocol.
    env = {**os.environ, "_GLEAMBRCTL_COMPLETE": "complete_bash"}
    env.update(COMP_WORDS="gleambrctl se", COMP_CWORD="1")
    words = subprocess.run([CTL], env=env, capture_output=True, text=True, timeout=60)
    assert sorted(words.stdout.split()) == ["search", "serve", "settings"]


def test_an_error_is_one_line_on_a_pipe_however_long(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 8), "missing")
    result = run("index", str(deep))
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and str(deep) in result.stderr


def test_chat_options_reach_the_session(package: Path) -> None:
    args = ("chat", str(package), "--top", "3", "--budget", "900", "--rerank", "--no-hyde")
    result = run(*args, stdin="/status\n")
    assert result.returncode == 0, result.stderr
    assert "rerank on, hyde off, 3 chunks, budget 900 tokens" in result.stdout


def test_a_module_filter_that_matches_nothing_says_so_with_the_modules(package: Path) -> None:
    result = run("search", "isbn", "--module", "bookshelf/isbnn", cwd=package)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no matches"
    # The likely typo comes first.
    assert result.stderr.startswith(
        "note: no chunk is in module bookshelf/isbnn; modules here: bookshelf/isbn, "
    ), result.stderr
    data = json.loads(run("search", "isbn", "--module", "nope", "--json", cwd=package).stdout)
    assert data["results"] == [] and data["hint"].startswith("no chunk is in module nope;")


def test_a_path_filter_that_matches_nothing_names_the_folders(package: Path) -> None:
    result = run("search", "isbn", "--path", "lib/", cwd=package)
    assert "no chunk is under path lib/" in result.stderr
    assert "folders here: src/bookshelf/, test/" in result.stderr


def test_a_filter_that_matches_gives_no_hint(package: Path) -> None:
    data = json.loads(
        run("search", "isbn", "--module", "bookshelf/isbn", "--json", cwd=package).stdout
    )
    assert data["results"] and "hint" not in data


# ----------------------------------------------------------------- item 7: editors, scripts


VIMGREP = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<name>\w+) \((?P<kind>\w+)\)( .*)?$"
)


def test_vimgrep_lines_use_paths_from_the_current_folder(package: Path) -> None:
    here = package / "src"
    result = run("search", "check that an ISBN is valid", "-k", "3", "--vimgrep", cwd=here)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        match = VIMGREP.match(line)
        assert match, line
        file = here / match["path"]
        assert file.is_file(), line  # opens from where the editor runs
        # The editor lands on the name where it is defined, not on its doc comment.
        at = file.read_text().splitlines()[int(match["line"]) - 1][int(match["col"]) - 1 :]
        assert at.startswith(match["name"]), line
    assert any(
        line.startswith("bookshelf/isbn.gleam:")
        and ":8: is_valid (function) pub fn is_valid(" in line
        for line in lines
    ), lines


def test_vimgrep_and_json_together_are_refused(package: Path) -> None:
    result = run("search", "isbn", "--vimgrep", "--json", cwd=package)
    assert result.returncode != 0 and "pass one" in result.stderr


@pytest.mark.parametrize(
    "args",
    [("search", "isbn"), ("status",), ("ask", "what is an isbn?", "--dry-run"), ("index", ".")],
)
def test_json_carries_schema_version_and_package(package: Path, args: tuple[str, ...]) -> None:
    result = run(*args, "--json", cwd=package)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["package"] == "bookshelf"
    assert list(data)[:2] == ["schema_version", "package"]


def test_search_help_says_what_the_score_means_in_each_mode() -> None:
    text = " ".join(help_of("search").split())
    assert "dense is the cosine similarity" in text
    assert "bm25 is the BM25 score" in text
    assert "hybrid mixes the two lists' scores" in text
