"""Telemetry never breaks a run: real `gleambrctl index` processes over real folders.

Before: an unwritable `events.jsonl` or a `--db` in an uncreatable folder ended in a
PermissionError/FileNotFoundError traceback from gbr/core/telemetry.py, and
`--db /dev/null` created `/dev/events.jsonl`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gbr.core import telemetry
from tests.conftest import copy_small
from tests.faults.conftest import Immutable
from tests.faults.files_faults_helpers import ctl, index_json, one_error_line


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_an_events_file_that_cannot_be_opened_costs_one_warning_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    root = copy_small(tmp_path / "pkg")
    (root / ".gbr" / "events.jsonl").mkdir(parents=True)  # unopenable for anyone, root too

    summary, stderr = index_json(root, home=tmp_path / "home")

    assert summary["files_indexed"] == 5
    assert "Traceback" not in stderr
    [warning] = _warnings(stderr)
    assert "events.jsonl" in warning and "goes on without them" in warning
    found = ctl("search", "isbn", "--mode", "bm25", "--json", cwd=root, home=tmp_path / "home")
    assert found.returncode == 0, found.stderr


def test_an_unwritable_events_file_costs_one_warning(tmp_path: Path, immutable: Immutable) -> None:
    root = copy_small(tmp_path / "pkg")
    events = root / ".gbr" / "events.jsonl"
    events.parent.mkdir()
    events.write_text("")
    immutable.make(events)  # `chattr +i`: unwritable for root too, unlike chmod

    summary, stderr = index_json(root, home=tmp_path / "home")

    assert summary["files_indexed"] == 5
    assert "Traceback" not in stderr and len(_warnings(stderr)) == 1


def test_a_db_in_a_folder_that_cannot_be_made_is_one_error_line_with_the_fix(
    tmp_path: Path,
) -> None:
    root = copy_small(tmp_path / "pkg")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    db = blocker / "sub" / "index.duckdb"

    done = ctl("index", str(root), "--db", str(db), home=tmp_path / "home")

    line = one_error_line(done)
    assert f"cannot create the folder {db.parent}" in line
    assert line.endswith("pass --db with a file in a writable folder")
    assert blocker.read_text() == "not a folder\n"


def test_db_dev_null_is_refused_and_creates_nothing_beside_it(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "pkg")
    beside = Path("/dev/events.jsonl")
    existed = beside.exists()
    try:
        done = ctl("index", str(root), "--db", "/dev/null", home=tmp_path / "home")
        created = not existed and beside.exists()
    finally:
        if not existed and beside.exists():
            beside.unlink()  # made by the code under test (before the fix)
    assert not created, "index --db /dev/null created /dev/events.jsonl"
    # Nothing was locked, copied, set aside or renamed over the device.
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not list(Path("/dev").glob("null.*"))
    line = one_error_line(done)
    assert "/dev/null is not a regular file" in line and "--db" in line
    assert not _warnings(done.stderr)  # the error says it all


def _open_handles(path: Path) -> int:
    """How many descriptors of this process point at `path` (Linux /proc)."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == str(path):
                count += 1
        except OSError:
            continue
    return count


def test_telemetry_is_configured_once_and_closes_what_it_opened(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "events.jsonl", tmp_path / "b" / "events.jsonl"
    try:
        telemetry.configure(first)
        telemetry.configure(first)
        assert _open_handles(first) == 1
        telemetry.log().info("one_event")
        telemetry.configure(second)
        assert (_open_handles(first), _open_handles(second)) == (0, 1)
        assert '"event": "one_event"' in first.read_text()
    finally:
        telemetry.close()
    assert _open_handles(second) == 0
