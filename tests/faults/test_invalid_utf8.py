"""Bytes that are not UTF-8, where a shell lets anyone pass them (issue 32, item 8).

Before: `search $'fines \\xff'`, `search -` with such a line, `ask … --dry-run`,
`refs $'\\xff'` and `callers $'x\\xff'` each ended in a Python traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.daemon.conftest import CTL, clean_env
from tests.faults.test_machine_output import indexed as indexed  # the module's index


def run(root: Path, home: Path, *args: bytes, stdin: bytes | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [os.fsencode(CTL), *args],
        cwd=root,
        env=clean_env(home, COLUMNS="1000"),
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.parametrize(
    ("args", "number", "shown"),
    [
        ([b"search", b"fines \xff"], 2, r"'fines \xff'"),
        ([b"search", b"-k", b"3", b"isbn \xc3"], 4, r"'isbn \xc3'"),
        ([b"ask", b"--dry-run", b"why \xfe?"], 3, r"'why \xfe?'"),
        ([b"refs", b"\xff"], 2, r"'\xff'"),
        ([b"callers", b"x\xff"], 2, r"'x\xff'"),
    ],
)
def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2(
    indexed: Path, tmp_path: Path, args: list[bytes], number: int, shown: str
) -> None:
    code, out, err = run(indexed, tmp_path / "home", *args)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"error: argument {number} ({shown}) is not valid UTF-8; "
        "pass names and questions as UTF-8 text"
    ]


def test_a_stdin_line_that_is_not_utf8_ends_search_lines_with_one_line(
    indexed: Path, tmp_path: Path
) -> None:
    code, out, err = run(
        indexed, tmp_path / "home", b"search", b"-", stdin=b"isbn\nfines \xff\nx\n"
    )
    assert code == 2
    assert [json.loads(line)["query"] for line in out.splitlines()] == ["isbn"]
    assert err.splitlines()[-1] == (
        "error: line 2 of stdin is not valid UTF-8; pass queries as UTF-8 text"
    )
    assert "Traceback" not in err
