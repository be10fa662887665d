"""Which file-system events a daemon re-indexes: pure rules, no watcher needed."""

from __future__ import annotations

import pytest

from gbr.core.parse.changes import ChangeSet, classify, relevant


@pytest.mark.parametrize(
    ("kind", "rel", "wanted"),
    [
        ("modified", "src/app.gleam", True),
        ("deleted", "test/app_test.gleam", True),
        ("added", "src/new/folder", True),  # a folder moved in whole
        ("deleted", "src/old", True),  # a folder moved out whole
        ("modified", "src/app", False),  # a folder's own timestamps say nothing new
        ("modified", ".gbr/index.duckdb", False),  # the daemon's own writes
        ("modified", ".gbr/index.duckdb.wal", False),
        ("added", ".gbr/events.jsonl", False),
        ("modified", ".git/index", False),
        ("modified", "src/.#app.gleam", False),  # an editor lock file
        ("added", "src/.app.gleam.swp", False),
        ("modified", "src/app.gleam~", False),
        ("modified", "README.md", False),
        ("modified", "node_modules/x/y.gleam", False),
        ("modified", "gleam.toml", True),
        ("modified", "src/.gitignore", True),
        ("modified", "../outside.gleam", False),
        ("modified", "", False),
    ],
)
def test_relevant_keeps_sources_folders_and_config(kind: str, rel: str, wanted: bool) -> None:
    assert relevant(kind, rel) is wanted  # type: ignore[arg-type]


def test_classify_collects_paths_and_asks_for_a_full_pass_on_config_changes() -> None:
    batch = classify(
        [
            ("modified", "src/a.gleam"),
            ("deleted", "src/b.gleam"),
            ("modified", ".gbr/index.duckdb"),
            ("modified", "src/a.gleam"),
        ]
    )
    assert batch == ChangeSet(frozenset({"src/a.gleam", "src/b.gleam"}), full=False)
    assert batch
    assert classify([("modified", ".gitignore")]).full
    assert classify([("modified", "gleam.toml"), ("modified", "src/a.gleam")]).full
    assert not classify([("modified", ".gbr/index.duckdb.wal")])
