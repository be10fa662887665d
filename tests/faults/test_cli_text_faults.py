"""Reasons and file names are the user's text: the CLI prints them as written.

Before: rich turned `:x:` in a file name or a parse excerpt into an emoji (`❌`).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import copy_small
from tests.faults.files_faults_helpers import ctl

NAME = "src/odd_:x:_[bold]name.gleam"
BROKEN = "pub fn odd() {\n  let x = :x: [bold]oops[/bold] :+1:\n"


def test_names_and_reasons_print_as_written(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "pkg")
    (root / NAME).write_text(BROKEN)
    home = tmp_path / "home"

    done = ctl("index", str(root), home=home)
    assert done.returncode == 0, done.stderr
    status = ctl("status", cwd=root, home=home)
    assert status.returncode == 0, status.stderr

    for output in (done.stdout, status.stdout):
        [line] = [ln for ln in output.splitlines() if "dropped src/odd" in ln]
        assert f"dropped {NAME}: " in line
        assert ":x: [bold]oops[/bold] :+1:" in line
        assert "❌" not in line and "👍" not in line
