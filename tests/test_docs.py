"""The docs say what the code does: the CLI reference is generated from `--help`, every
`GBR_*` variable the code reads is documented (and none that it does not), every link
between the pages leads somewhere, and the README stays short.

The console sessions in the pages are replayed by tests/test_readme.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs.generate_cli import CLI_MD, render
from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", REPO / "bench" / "README.md", *sorted(DOCS.rglob("*.md"))]
ENV_NAME = re.compile(r"\bGBR_[A-Z][A-Z0-9_]*[A-Z0-9]\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def env_names_in_code() -> set[str]:
    return {
        name
        for path in (REPO / "gbr").rglob("*.py")
        for name in ENV_NAME.findall(path.read_text("utf-8"))
    }


def test_the_cli_reference_is_what_help_prints() -> None:
    assert CLI_MD.read_text("utf-8") == render(), (
        "docs/cli.md is out of date; run .venv/bin/python docs/generate_cli.py"
    )


def test_the_cli_reference_covers_every_command() -> None:
    page = CLI_MD.read_text("utf-8")
    for name in ("index", "search", "ask", "chat", "status", "settings", "serve", "mcp"):
        assert f"## gleambrctl {name}\n" in page
        assert f"Usage: gleambrctl {name} [OPTIONS]" in page


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    documented = set(ENV_NAME.findall((DOCS / "configuration.md").read_text("utf-8")))
    in_code = env_names_in_code()
    assert len(in_code) > 15  # the scan itself works
    assert sorted(in_code - documented) == [], "add these to docs/configuration.md"
    assert sorted(documented - in_code) == [], "docs/configuration.md names what no code reads"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation gone, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_leads_somewhere(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert broken == []


def test_the_slugs_match_githubs() -> None:
    assert slug("The second opinion's vectors, filled while idle") == (
        "the-second-opinions-vectors-filled-while-idle"
    )
    assert slug("Leaving files out: `.gbrignore`") == "leaving-files-out-gbrignore"


def test_the_readme_is_for_users() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) < 200
    first_screen = "\n".join(readme.splitlines()[:50])
    for must in ("gleambrctl search", "make demo", "make test", "pip"):
        assert must in first_screen
    for heading in ("## The web page", "### Settings", ".gbrignore"):
        assert heading in readme


def test_every_bench_has_a_row_in_its_readme() -> None:
    for folder in (REPO / "bench", REPO / "bench" / "experiments"):
        table = (folder / "README.md").read_text("utf-8")
        scripts = [p.name for p in folder.glob("*.py") if not p.name.startswith("_")]
        assert scripts
        assert [s for s in scripts if f"`{s}`" not in table] == [], folder


def test_every_script_the_docs_name_exists() -> None:
    named = {
        m
        for page in PAGES
        for m in re.findall(r"\b((?:bench|docs|tests)/[\w/]+\.py)\b", page.read_text("utf-8"))
    }
    assert named
    assert sorted(n for n in named if not (REPO / n).exists()) == []


def documented_command_lines() -> list[tuple[str, str]]:
    """(page, command line) of every `$ gleambrctl …` line in a console block of the pages."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```console\n(.*?)```", page.read_text("utf-8"), flags=re.S):
            for line in block.splitlines():
                if line.startswith("$ gleambrctl "):
                    command = re.sub(r"\s+#\s.*$", "", line[2:])  # a trailing comment is prose
                    found.append((str(page.relative_to(REPO)), command))
    return found


def test_the_pages_show_command_lines() -> None:
    pages = {page for page, _ in documented_command_lines()}
    assert "README.md" in pages and len(documented_command_lines()) > 10


@pytest.mark.parametrize(("page", "command"), documented_command_lines())
def test_every_documented_command_line_parses(page: str, command: str) -> None:
    """Each option and argument on the line exists: with `--help` at the end, the parser
    reads the whole line first, so an unknown option or a value of the wrong type fails."""
    import shlex

    from typer.testing import CliRunner

    from gbr.cli import app

    args = shlex.split(command)[1:]
    done = CliRunner().invoke(app, [*args, "--help"], prog_name="gleambrctl")
    assert done.exit_code == 0, f"{page}: `{command}`: {done.output.strip()[-300:]}"
