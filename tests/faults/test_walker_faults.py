"""Bad file names and symlinks leading out of the package, as real `gleambrctl` runs.

Before: `src/bad\\xffname.gleam` crashed the embedder twice and dead-lettered valid files
with it, and `src/pkg/passwd.gleam -> /etc/passwd` was indexed, its first line landing in
`status` and `events.jsonl` as a parse excerpt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import duckdb

from gbr.core.parse.walker import FoundFile, walk
from gbr.core.records import FileProblem
from tests.conftest import copy_small
from tests.faults.files_faults_helpers import ctl, index_json

SMALL_MODULES = 5  # the .gleam files of copy_small


def test_an_undecodable_file_name_is_skipped_with_a_reason_and_the_rest_indexes(
    tmp_path: Path,
) -> None:
    root = copy_small(tmp_path / "pkg")
    (root / "src").mkdir(exist_ok=True)
    bad = os.path.join(os.fsencode(root / "src"), b"bad\xffname.gleam")
    with open(bad, "wb") as handle:
        handle.write(b"pub fn fine() { 1 }\n")

    summary, _ = index_json(root, home=tmp_path / "home")

    assert summary["files_indexed"] == SMALL_MODULES
    assert (summary["restarts"], summary["dead_letters"]) == (0, 0)
    [dropped] = summary["dropped"]
    assert dropped["path"] == "src/bad\\xffname.gleam"
    assert dropped["kind"] == "undecodable_name"
    assert "not valid UTF-8" in dropped["reason"]

    status = ctl("status", "--db", str(root / ".gbr" / "index.duckdb"), home=tmp_path / "home")
    assert status.returncode == 0, status.stderr
    assert "dropped src/bad\\xffname.gleam: file name is not valid UTF-8" in status.stdout
    events = [
        json.loads(line) for line in (root / ".gbr" / "events.jsonl").read_text().splitlines()
    ]
    assert any(
        e["event"] == "file_dropped" and e["file"] == "src/bad\\xffname.gleam" for e in events
    )

    # A second run changes nothing: the skipped name is neither re-tried nor "removed".
    again, _ = index_json(root, home=tmp_path / "home")
    assert (again["files_unchanged"], again["files_removed"]) == (SMALL_MODULES, 0)


def _passwd_first_line() -> str:
    line = Path("/etc/passwd").read_text().splitlines()[0]
    assert len(line) > 8  # a real line, so finding it would mean something
    return line


def test_symlinks_out_of_the_package_are_not_followed_and_leave_no_trace(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "pkg")
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "passwd.gleam").symlink_to("/etc/passwd")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "far.gleam").write_text("pub fn far_away_marker() { 42 }\n")
    (root / "src" / "linked").symlink_to(outside, target_is_directory=True)
    # Links that stay inside still work, and a loop still ends.
    (root / "src" / "same").symlink_to(root / "src" / "bookshelf", target_is_directory=True)
    (root / "src" / "pkg" / "loop").symlink_to("..", target_is_directory=True)

    summary, _ = index_json(root, home=tmp_path / "home")

    kinds = {d["path"]: d["kind"] for d in summary["dropped"]}
    assert kinds["src/pkg/passwd.gleam"] == "outside_link"
    assert kinds["src/linked"] == "outside_link"
    assert kinds["src/pkg/loop"] == "symlink_loop"
    db = root / ".gbr" / "index.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        ok = {p for (p,) in con.execute("SELECT path FROM files WHERE status = 'ok'").fetchall()}
        dump = json.dumps(
            con.execute("SELECT * FROM files").fetchall()
            + con.execute("SELECT path, name, text, search_text FROM chunks").fetchall(),
            default=str,
        )
    assert "src/same/isbn.gleam" in ok  # the link inside the package was walked
    assert not any("far" in p for p in ok)

    status = ctl("status", "--json", "--db", str(db), home=tmp_path / "home")
    assert status.returncode == 0, status.stderr
    events = (root / ".gbr" / "events.jsonl").read_text()
    secret = _passwd_first_line()
    for where, text in {"status": status.stdout, "events": events, "db": dump}.items():
        assert secret not in text, where
        assert "far_away_marker" not in text, where

    # Asked for, the folder outside is indexed.
    summary, _ = index_json(root, "--follow-outside-links", home=tmp_path / "home")
    assert "src/linked" not in {d["path"] for d in summary["dropped"]}
    found = ctl("search", "far_away_marker", "--mode", "bm25", "--json", "--db", str(db), home=root)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["path"] == "src/linked/far.gleam"


def test_an_undecodable_folder_is_one_problem_and_an_ignored_name_is_silent(
    make_package: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = make_package({"src/ok.gleam": "", ".gitignore": "ignored_*\n"})
    src = os.fsencode(root / "src")
    os.makedirs(os.path.join(src, b"dir\xfe"))
    for name in (b"dir\xfe/inner.gleam", b"ignored_\xff.gleam"):
        with open(os.path.join(src, name), "wb") as handle:
            handle.write(b"pub fn x() { 1 }\n")

    items = list(walk(root))

    assert [i.path for i in items if isinstance(i, FoundFile)] == ["src/ok.gleam"]
    [problem] = [i for i in items if isinstance(i, FileProblem)]
    assert (problem.path, problem.kind) == ("src/dir\\xfe", "undecodable_name")
    assert "its files are skipped" in problem.reason
