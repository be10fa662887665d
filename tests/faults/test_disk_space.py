"""An `index` run needs room for one copy of the index, and says so first (issue 32, item 13).

On a real small file system (a tmpfs, shrunk with `remount` once the first index is in):
with room for one copy (grown as a run grows it) but not two, a one-line change completes
(the copy shown to readers mid-run, which needs a second copy, is left out); with less than
one copy, the run stops before copying, in one line naming the space it needs at least,
and the index is left as it was. Mounting needs root, as `make test` does.

Before: a one-line change needed about three times the index (the index, `.next`, and a
`.publish` copy at once), and failed with room for two; the error came from the copy,
without the figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gbr.core.store.snapshot import room_for_copy
from tests.conftest import copy_small
from tests.faults.conftest import ctl

EDIT = "\npub fn lengthen_the_loan_period(days: Int) -> Int {\n  days + 14\n}\n"
NEW_NAME = "lengthen_the_loan_period"


class SmallDisk:
    """A tmpfs mounted at `path`, whose size can be set again while files are on it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def used(self) -> int:
        return shutil.disk_usage(self.path).used

    def resize(self, size: int) -> None:
        kib = (size + 1023) // 1024
        subprocess.run(
            ["mount", "-o", f"remount,size={kib}k", str(self.path)], check=True, capture_output=True
        )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(
            f"cannot mount a small tmpfs here (the drill needs root): {done.stderr.strip()}"
        )
    try:
        yield SmallDisk(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def indexed_then_edited(disk: SmallDisk, home: Path) -> tuple[Path, int]:
    root = copy_small(disk.path / "pkg")
    done = ctl("index", str(root), cwd=root, home=home)
    assert done.returncode == 0, done.stderr
    with (root / "src" / "bookshelf" / "member.gleam").open("a") as out:
        out.write(EDIT)
    return root, (root / ".gbr" / "index.duckdb").stat().st_size


def finds_new_name(root: Path, home: Path) -> bool:
    done = ctl("search", NEW_NAME, "--mode", "bm25", "--json", cwd=root, home=home)
    assert done.returncode == 0, done.stderr
    return any(h["name"] == NEW_NAME for h in json.loads(done.stdout)["results"])


def test_room_for_one_copy_is_enough_for_a_one_line_change(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    root, size = indexed_then_edited(small_disk, home)
    # Room for one copy grown to twice the index (a fresh index's first change rebuilds its
    # full-text tables into new blocks: 3.9 MB grew to 7.4 MB), not for a second copy.
    small_disk.resize(small_disk.used() + 2 * size + (1 << 20))
    done = ctl("index", str(root), cwd=root, home=home)
    assert done.returncode == 0, done.stderr
    assert finds_new_name(root, home)
    events = (root / ".gbr" / "events.jsonl").read_text()
    assert '"publish_skipped"' in events  # the mid-run copy was the one left out
    assert sorted(p.name for p in (root / ".gbr").glob("index.duckdb.*")) == [
        "index.duckdb.lock",
        "index.duckdb.vectors",
    ]


def run_without_room(
    disk: SmallDisk, home: Path, *flags: str
) -> tuple[Path, int, bytes, subprocess.CompletedProcess[str]]:
    """An index run on a disk with room for half the index: root, size, bytes before, run."""
    root, size = indexed_then_edited(disk, home)
    before = (root / ".gbr" / "index.duckdb").read_bytes()
    disk.resize(disk.used() + size // 2)
    return root, size, before, ctl("index", str(root), *flags, cwd=root, home=home)


def test_without_room_for_a_copy_the_run_names_the_space_it_needs(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    root, size, before, done = run_without_room(small_disk, home)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "not enough free space" in lines[0]
    assert f"needs at least {room_for_copy(size) / 1e6:.1f} MB free" in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert (root / ".gbr" / "index.duckdb").read_bytes() == before
    assert not (root / ".gbr" / "index.duckdb.next").exists()
    assert not finds_new_name(root, home)


def test_a_rebuild_without_room_names_the_new_index_it_builds_not_a_copy(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    root, _, before, done = run_without_room(small_disk, tmp_path / "home", "--rebuild")
    assert done.returncode != 0
    # The rebuild's own note comes first; the error is the one line after it.
    note, error = done.stderr.strip().splitlines()
    assert note.startswith("rebuilding the index"), done.stderr
    assert "not enough free space" in error
    assert "the new index it builds" in error and "copy" not in error, error
    assert "Traceback" not in done.stderr
    assert (root / ".gbr" / "index.duckdb").read_bytes() == before
