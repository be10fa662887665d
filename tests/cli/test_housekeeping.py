"""What an everyday `index` leaves and says: a run that changes nothing reads as such, the
index folder keeps itself out of git, and `status` names index files kept aside."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from gbr.core.embed.embedder import OnnxEmbedder
from tests.actors.test_embed_after_write import cut_short
from tests.conftest import CTL


def ctl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [CTL, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def test_a_run_that_changes_nothing_says_so_with_the_index_size(small_example: Path) -> None:
    first = ctl("index", str(small_example), "--json")
    assert first.returncode == 0, first.stderr
    chunks = json.loads(first.stdout)["chunks"]

    again = ctl("index", str(small_example))

    assert again.returncode == 0, again.stderr
    assert f"nothing changed; {chunks} chunks in the index" in again.stdout
    assert "chunks/s" not in again.stdout and "0 chunks (" not in again.stdout
    data = json.loads(ctl("index", str(small_example), "--json").stdout)
    assert data["chunks"] == 0 and data["chunks_in_index"] == chunks


def test_a_run_that_changes_something_still_counts_its_chunks(small_example: Path) -> None:
    assert ctl("index", str(small_example)).returncode == 0
    isbn = small_example / "src/bookshelf/isbn.gleam"
    isbn.write_text(isbn.read_text() + "\npub fn one_more() -> Int {\n  1\n}\n")

    again = ctl("index", str(small_example))

    assert again.returncode == 0, again.stderr
    assert "nothing changed" not in again.stdout and "chunks/s" in again.stdout


def test_the_index_folder_keeps_itself_out_of_git(small_example: Path) -> None:
    assert ctl("index", str(small_example)).returncode == 0
    ignore = small_example / ".gbr" / ".gitignore"
    assert ignore.read_text().splitlines()[-1] == "*"
    # Real git agrees: nothing under .gbr/ is a candidate for `git add`.
    subprocess.run(["git", "init", "-q"], cwd=small_example, check=True)
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=small_example,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ".gbr" not in listed.stdout and "src/bookshelf/isbn.gleam" in listed.stdout


def test_a_gitignore_of_the_users_own_is_left_alone(small_example: Path) -> None:
    (small_example / ".gbr").mkdir()
    (small_example / ".gbr" / ".gitignore").write_text("events.jsonl\n")
    assert ctl("index", str(small_example)).returncode == 0
    assert (small_example / ".gbr" / ".gitignore").read_text() == "events.jsonl\n"


def test_status_lists_index_files_kept_aside(small_example: Path) -> None:
    assert ctl("index", str(small_example)).returncode == 0
    aside = small_example / ".gbr" / "index.duckdb.corrupt-20261204T050000Z"
    aside.write_bytes(b"x" * 2_000_000)
    (small_example / ".gbr" / "index.duckdb.corrupt-20261204T050000Z.wal").write_bytes(b"w")

    shown = ctl("status", cwd=small_example)
    data = json.loads(ctl("status", "--json", cwd=small_example).stdout)

    assert shown.returncode == 0, shown.stderr
    assert f"kept aside {aside} (2.0 MB)" in shown.stdout
    assert data["kept_aside"] == [{"path": str(aside), "bytes": 2_000_000}]


def test_a_resumed_run_says_what_it_filled_in_without_a_chunk_rate(
    small_example: Path, model: OnnxEmbedder
) -> None:
    """Issue 32 item 14: a run after one cut short only fills in the missing vectors.
    Before, its summary said `0 chunks (N embedded, ...) ..., 0 chunks/s` (and later
    "nothing changed", with N vectors embedded)."""
    embedded, chunks = cut_short(small_example, small_example / ".gbr" / "index.duckdb", model)
    missing = chunks - embedded

    again = ctl("index", str(small_example))

    assert again.returncode == 0, again.stderr
    assert f"{missing} missing vectors filled in (" in again.stdout, again.stdout
    assert "chunks/s" not in again.stdout and "nothing changed" not in again.stdout
