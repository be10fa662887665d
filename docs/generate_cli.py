"""Write docs/cli.md from the `--help` of every `gleambrctl` command, so it cannot drift.

    .venv/bin/python docs/generate_cli.py          # rewrite docs/cli.md
    .venv/bin/python docs/generate_cli.py --check  # exit 1 when docs/cli.md is out of date

The help is taken in this process through typer's test runner, at a fixed width of 80
columns, so the page is the same on every machine; tests/test_docs.py compares it with the
committed file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

CLI_MD = Path(__file__).resolve().parent / "cli.md"
WIDTH = {"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
HEADER = """# `gleambrctl` command reference

Generated from `--help` by `docs/generate_cli.py`; do not edit by hand. Run
`.venv/bin/python docs/generate_cli.py` after changing a command, and
`tests/test_docs.py` checks that this page matches. The commands at a glance are in
[commands.md](commands.md).
"""


def command_names() -> list[str]:
    """Every command of the app, in the order `gleambrctl --help` lists them."""
    from gbr.cli import app

    return list(getattr(typer.main.get_command(app), "commands", {}))


def help_text(args: list[str]) -> str:
    from gbr.cli import app

    done = CliRunner().invoke(app, [*args, "--help"], prog_name="gleambrctl", env=WIDTH)
    if done.exit_code != 0:
        raise RuntimeError(f"gleambrctl {' '.join(args)} --help exited {done.exit_code}")
    return "\n".join(line.rstrip() for line in done.output.strip().splitlines())


def render() -> str:
    parts = [HEADER, "## gleambrctl\n", "```text", help_text([]), "```\n"]
    for name in command_names():
        parts += [f"## gleambrctl {name}\n", "```text", help_text([name]), "```\n"]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        if CLI_MD.read_text("utf-8") != page:
            print(f"{CLI_MD} is out of date; run .venv/bin/python docs/generate_cli.py")
            return 1
        return 0
    CLI_MD.write_text(page, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
