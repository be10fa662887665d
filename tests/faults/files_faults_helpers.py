"""Shared by the file-fault tests: `gleambrctl` run as a user runs it, and what it left."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import duckdb

from tests.conftest import CTL
from tests.daemon.conftest import clean_env


def ctl(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """One `gleambrctl` process with no provider configured and wide, colourless output."""
    return subprocess.run(
        [CTL, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=clean_env(home),
        timeout=300,
    )


def index_json(root: Path, *args: str, home: Path) -> tuple[dict[str, Any], str]:
    """`index --json`: the summary and stderr; fails the test on a non-zero exit."""
    done = ctl("index", str(root), "--json", *args, home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single `error:` line a failed command must print, and nothing like a traceback."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


HEADER_BYTES = 3 * 4096  # DuckDB's main header and its two database headers
BLOCK_BYTES = 256 * 1024


def garbage_in_the_middle(db: Path) -> None:
    """64 KB of random bytes inside a block the chunks live in (a free block, which no
    query reads, would prove nothing)."""
    with duckdb.connect(str(db), read_only=True) as con:
        (block,) = con.execute(
            "SELECT max(block_id) FROM pragma_storage_info('chunks') "
            "WHERE persistent AND block_id >= 0"
        ).fetchone() or (None,)
    assert block is not None
    with db.open("r+b") as handle:
        handle.seek(HEADER_BYTES + block * BLOCK_BYTES + 1024)
        handle.write(os.urandom(64 * 1024))
