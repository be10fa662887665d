"""The README's and the docs' console sessions are run, so they cannot drift from the tool.

A console block that follows a `<!-- checked: tests/test_readme.py -->` line (in README.md or
any page under docs/) is replayed in
a copy of the repository's examples: each `$ command` runs in a shell (with `gleambrctl` on
PATH and no LLM keys), and its output must match the lines under it. Figures that vary from
run to run (timings, rates, scores: any decimal number) match any decimal number, and a line
`…` on its own accepts whatever output is left. A `… ` at the end of a line accepts anything
after what comes before it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CTL, PROVIDER_VARS, REPO

MARKER = "<!-- checked: tests/test_readme.py -->"
DECIMAL = re.compile(r"\d+\.\d+")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def every_block() -> list[tuple[str, int]]:
    """(page relative to the repository, block number) of every checked session."""
    return [
        (str(page.relative_to(REPO)), n)
        for page in PAGES
        for n in range(len(checked_blocks(page.read_text("utf-8"))))
    ]


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def checked_blocks(readme: str) -> list[list[Step]]:
    """The console blocks right after each marker, as commands and their expected output."""
    blocks: list[list[Step]] = []
    for part in readme.split(MARKER)[1:]:
        match = re.match(r"\s*```console\n(.*?)```", part, re.S)
        assert match, f"{MARKER} must be followed by a ```console block"
        steps: list[Step] = []
        for line in match.group(1).splitlines():
            if line.startswith("$ "):
                command = re.sub(r"\s+#\s.*$", "", line[2:])  # a trailing comment is prose
                steps.append(Step(command))
            else:
                assert steps, f"output before any command in a checked block: {line!r}"
                steps[-1].expected.append(line)
        for step in steps:  # a blank line between sessions is layout, not output
            while step.expected and not step.expected[-1].strip():
                step.expected.pop()
        blocks.append(steps)
    return blocks


def matches(expected: list[str], actual: list[str]) -> str | None:
    """None when `actual` fits `expected`, else the first line that does not."""
    for n, want in enumerate(expected):
        if want.strip() == "…":
            return None
        if n >= len(actual):
            return f"missing line {n + 1}: {want!r}"
        got = actual[n]
        pattern = re.escape(DECIMAL.sub("\0", want.removesuffix("…")))
        pattern = pattern.replace("\0", r"\d+\.\d+") + (".*" if want.endswith("…") else "")
        if not re.fullmatch(pattern, got):
            return f"line {n + 1}: expected {want!r}, got {got!r}"
    if len(actual) > len(expected):
        return f"unexpected line {len(expected) + 1}: {actual[len(expected)]!r}"
    return None


def test_the_readme_has_checked_sessions() -> None:
    blocks = checked_blocks((REPO / "README.md").read_text("utf-8"))
    assert blocks and all(blocks)


@pytest.mark.parametrize(("page", "block"), every_block())
def test_a_session_prints_what_its_page_shows(page: str, block: int, tmp_path: Path) -> None:
    steps = checked_blocks((REPO / page).read_text("utf-8"))[block]
    work = tmp_path / "repo"
    shutil.copytree(REPO / "examples", work / "examples", ignore=shutil.ignore_patterns(".gbr"))
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(
        PATH=f"{Path(CTL).parent}{os.pathsep}{env.get('PATH', '')}",
        GBR_HOME=str(tmp_path / "home"),
        COLUMNS="200",
        NO_COLOR="1",
        TERM="dumb",
    )
    cwd = work
    for step in steps:
        command = step.command
        if command.startswith("cd ") and "&&" not in command:
            cwd = (cwd / command[3:].strip()).resolve()
            continue
        done = subprocess.run(
            command,
            shell=True,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = (done.stdout + done.stderr).replace(str(work) + "/", "").splitlines()
        problem = matches(step.expected, output)
        assert problem is None, f"{page} `$ {command}`: {problem}\n--- output:\n" + "\n".join(
            output
        )


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["a 1.5 s", "…"], ["a 22.07 s", "b", "c"], True),
        (["a 1.5 s"], ["a 22 s"], False),
        (["x… "], ["x anything"], False),
        (["x…"], ["x anything"], True),
        (["x"], ["x", "y"], False),
        (["x", "y"], ["x"], False),
    ],
)
def test_the_matcher_accepts_only_what_it_says(
    expected: list[str], actual: list[str], ok: bool
) -> None:
    assert (matches(expected, actual) is None) is ok
