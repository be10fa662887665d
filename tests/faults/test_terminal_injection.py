"""Escape sequences and newlines in names, code, doc comments and answers are shown, never
run (issue 32, item 7).

Before: `search`, `refs`, `callers`, `--vimgrep` and `ask` printed them raw: `\\e]0;…\\a`
retitled the terminal, `\\e[2J` cleared it, and a newline in a file name split a vimgrep
record in two. `--json` keeps the exact text.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.conftest import CTL, clean_env
from tests.daemon.conftest import fake as fake  # the module's fake LLM
from tests.fake_llm import FakeLlm, Reply

KEY = "sk-test-INJECT-1234567890"
TITLE = "\x1b]0;pwned\x07"  # OSC 0: retitle the terminal
CLEAR = "\x1b[2J"  # CSI 2J: clear it
ODD_FILE = "src/app/odd\x1b[31m\nname.gleam"  # an escape and a newline in the name


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("inject") / "pkg"
    files = {
        "gleam.toml": 'name = "app"\nversion = "1.0.0"\n',
        "src/app/ok.gleam": (
            f"/// Greets a reader {TITLE} politely.\n"
            f'pub fn greet(name: String) -> String {{\n  "{CLEAR}" <> name\n}}\n'
        ),
        ODD_FILE: 'import app/ok\n\npub fn odd_greet() -> String {\n  ok.greet("x")\n}\n',
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    done = subprocess.run(
        [CTL, "index", str(root)],
        env=clean_env(root.parent / "home"),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    yield root


def ctl(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [CTL, *args],
        cwd=root,
        env=clean_env(root.parent / "home", COLUMNS="1000", **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def no_escapes(text: str) -> bool:
    return "\x1b" not in text and "\x07" not in text and "\x9b" not in text


@pytest.mark.parametrize(
    "args",
    [
        ("search", "greet a reader"),
        ("search", "greet a reader", "--mode", "bm25"),
        ("refs", "greet"),
        ("callers", "greet"),
        ("ask", "--dry-run", "how do I greet a reader"),
    ],
)
def test_escapes_in_code_names_and_docs_are_shown_not_run(
    package: Path, args: tuple[str, ...]
) -> None:
    done = ctl(package, *args)
    assert no_escapes(done.stdout) and no_escapes(done.stderr)
    assert "\\x1b" in done.stdout  # shown, in a form a reader can see


def test_vimgrep_keeps_one_record_a_line_and_json_keeps_the_exact_text(package: Path) -> None:
    lines = ctl(package, "search", "odd greet", "--vimgrep").stdout.splitlines()
    exact = json.loads(ctl(package, "search", "odd greet", "--json").stdout)["results"]
    assert len(lines) == len(exact)  # a newline in a name no longer splits a record
    assert all(no_escapes(line) for line in lines)
    assert any("odd\\x1b[31m\\x0aname.gleam:" in line for line in lines)
    assert ODD_FILE in {hit["path"] for hit in exact}


def test_an_answer_with_escape_sequences_is_shown_not_run(package: Path, fake: FakeLlm) -> None:
    fake.script(Reply(f"Use greet.{TITLE}{CLEAR} Done.", chunks=5))
    done = ctl(package, "ask", "--no-hyde", "how do I greet", **fake.env("groq", KEY))
    assert no_escapes(done.stdout)
    assert "Use greet.\\x1b]0;pwned\\x07\\x1b[2J Done." in done.stdout
