"""The fault suite: real processes, real files, real locks; each test reproduces one failure.

Helpers here hold an index from another process (as a `search` or `status` would), make a
folder immutable (root ignores chmod, not `chattr +i`), and run the CLI as a user would.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import CTL
from tests.daemon.conftest import clean_env
from tests.daemon.conftest import daemons as daemons  # the fixture, for this suite too

WIDE = "1000"  # terminal columns: the CLI's one-line errors are not wrapped in tests
# Opens the index (read-only unless told "write"), says so, and keeps it open until killed
# or `seconds` pass.
_HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[3] != "write")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


@contextmanager
def held_by_another_process(
    db: Path, seconds: float, write: bool = False
) -> Iterator[subprocess.Popen[str]]:
    """Another process (not gbr) holds `db` from now for `seconds`, or until the block ends:
    read-only, as a reader would, or for writing, which keeps every other process out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db), str(seconds), "write" if write else "read"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "held", proc.stderr.read() if proc.stderr else line
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def ctl(
    *args: str, cwd: Path, home: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """`gleambrctl ARGS` in a subprocess; the timeout is the test's bound on a hang."""
    return subprocess.run(
        [CTL, *args],
        cwd=cwd,
        env=clean_env(home, **{"COLUMNS": WIDE, **env}),
        capture_output=True,
        text=True,
        errors="surrogateescape",  # a name that is not UTF-8 comes back as it went in
        timeout=timeout,
    )


def start_ctl(*args: str, cwd: Path, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CTL, *args],
        cwd=cwd,
        env=clean_env(home, COLUMNS=WIDE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Immutable:
    """Folders made immutable (`chattr +i`): nothing can be created or removed in them, not
    even by root, which ignores chmod. Fails, naming why, when chattr is missing or
    refused (no CAP_LINUX_IMMUTABLE, or a file system without attributes): the drills run as
    root, as `make test` does (it installs chromium with apt)."""

    def __init__(self) -> None:
        self.chattr = shutil.which("chattr")
        self.folders: list[Path] = []

    def make(self, folder: Path) -> None:
        if self.chattr is None:
            pytest.fail(
                "chattr is not installed (Debian's e2fsprogs has it), and root ignores chmod"
            )
        done = subprocess.run([self.chattr, "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"chattr +i is refused here (the drills need root): {done.stderr.strip()}")
        self.folders.append(folder)

    def undo(self, folder: Path) -> None:
        assert self.chattr is not None
        subprocess.run([self.chattr, "-i", str(folder)], check=True)
        self.folders.remove(folder)


@pytest.fixture
def immutable() -> Iterator[Immutable]:
    made = Immutable()
    yield made
    for folder in list(made.folders):
        made.undo(folder)
