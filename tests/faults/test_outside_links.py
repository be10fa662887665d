"""Issue 32, item 15 (left by issue 15): files reached through a link out of the package.

Before: with `--follow-outside-links`, a file outside the package that failed to parse had
the failing line stored as its excerpt and quoted in its reason (in the index, `status`,
`events.jsonl` and the summary); and `serve` had no `--follow-outside-links` at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tests.conftest import copy_small
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon
from tests.faults.files_faults_helpers import ctl, index_json

SECRETS = ("hunter2_secret_line", "partial_secret_line")


def _package_with_an_outside_folder(base: Path) -> Path:
    """The small example, and `src/linked` -> a folder outside it holding a file that does
    not parse, one that parses in part, and one that parses."""
    root = copy_small(base / "pkg")
    outside = base / "elsewhere"
    outside.mkdir()
    (outside / "bad.gleam").write_text('pub fn broken_one() {\n  let = "hunter2_secret_line"\n}\n')
    (outside / "half.gleam").write_text(
        'pub fn fine_far() { 1 }\n\npub fn half() {\n  let = "partial_secret_line"\n}\n'
    )
    (outside / "far.gleam").write_text("pub fn far_away_marker() { 42 }\n")
    (root / "src" / "linked").symlink_to(outside, target_is_directory=True)
    return root


def _stored(db: Path) -> str:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT * FROM files").fetchall()
    return json.dumps(rows, default=str)


def test_a_parse_failure_outside_the_package_is_reported_without_quoting_it(
    tmp_path: Path,
) -> None:
    root = _package_with_an_outside_folder(tmp_path)
    home = tmp_path / "home"

    summary, stderr = index_json(root, "--follow-outside-links", home=home)

    problems = {p["path"]: p for p in [*summary["dropped"], *summary["partial"]]}
    assert problems["src/linked/bad.gleam"]["kind"] == "parse_failed"
    assert problems["src/linked/bad.gleam"]["line"] == 2  # still says where to look
    assert problems["src/linked/half.gleam"]["kind"] == "parse_partial"
    assert "not quoted" in problems["src/linked/bad.gleam"]["reason"]
    db = root / ".gbr" / "index.duckdb"
    status = ctl("status", "--json", "--db", str(db), home=home)
    assert status.returncode == 0, status.stderr
    events = (root / ".gbr" / "events.jsonl").read_text()
    said = {
        "summary": json.dumps(summary),
        "stderr": stderr,
        "status": status.stdout,
        "events": events,
        "files table": _stored(db),
    }
    for where, text in said.items():
        for secret in SECRETS:
            assert secret not in text, where
    # A failure inside the package is still quoted: the excerpt helps find the mistake.
    (root / "src" / "inside.gleam").write_text('pub fn x() {\n  let = "quoted_inside"\n}\n')
    summary, _ = index_json(root, "--follow-outside-links", home=home)
    assert "quoted_inside" in json.dumps(summary["dropped"])


def test_serve_follows_outside_links_when_asked_and_quotes_nothing_from_there(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = _package_with_an_outside_folder(tmp_path)
    daemon = start_daemon(root, "--follow-outside-links", env=clean_env(tmp_path / "home"))
    daemons.append(daemon)
    status = daemon.wait_idle()

    assert "far_away_marker" in daemon.names("far_away_marker")
    assert status["files_failed"] == 1 and status["files_partial"] == 1, status
    events = (root / ".gbr" / "events.jsonl").read_text()
    for where, text in {"status": json.dumps(status), "events": events}.items():
        for secret in SECRETS:
            assert secret not in text, where
    assert daemon.stop() == 0
