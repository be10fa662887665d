"""The million-chunk bench's own logic: copy counts, query mix, events, the "next wall".

The bench itself builds a tree of a million chunks and times it, which is no test's
business; these are its small pure parts, fed made-up figures.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench" / "million.py"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # the bench imports its neighbours by name
    return importlib.import_module("million")


def test_whole_copies_reach_the_target_and_never_go_negative(bench: ModuleType) -> None:
    assert bench.whole_copies(1_000_000, 339) == 2949  # 2950 packages: 1,000,050 chunks
    assert 339 * (bench.whole_copies(1_000_000, 339) + 1) >= 1_000_000
    assert bench.whole_copies(339, 339) == 0
    assert bench.whole_copies(10, 339) == 0
    with pytest.raises(ValueError):
        bench.whole_copies(10, 0)


def test_queries_alternate_questions_and_identifiers(bench: ModuleType) -> None:
    queries = bench.pick_queries(4)
    assert len(queries) == 4
    assert " " in queries[0] and " " not in queries[1]
    assert " " in queries[2] and " " not in queries[3]


def test_events_are_timed_from_the_first_one_after_the_offset(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    old = json.dumps({"event": "old", "timestamp": "2026-12-02T03:00:00.000000Z"}) + "\n"
    new = [
        {"event": "a", "timestamp": "2026-12-02T03:00:10.000000Z"},
        {"event": "b", "timestamp": "2026-12-02T03:00:12.500000Z"},
    ]
    path.write_text(old + "".join(json.dumps(e) + "\n" for e in new) + "not json\n")
    assert bench.events_since(path, len(old)) == [
        {"t": 0.0, "event": "a"},
        {"t": 2.5, "event": "b"},
    ]
    assert bench.events_since(tmp_path / "missing.jsonl", 0) == []


def figures(search_s: float, noop_s: float, changed_s: float) -> dict[str, Any]:
    run = {"peak_rss": 2e9, "seconds": changed_s}
    return {
        "build": {"chunks": 1_000_000, "files": 50_000},
        "size": {"total": 5e9, "vectors": 1.5e9, "duckdb": 3.5e9, "wal": 0},
        "search": [{"seconds": search_s, "peak_rss": 1.8e9}],
        "reindex": {
            "noop": {"seconds": noop_s, "peak_rss": 1e9},
            "changed": run,
            "restored": run
            | {
                "phases": {
                    "model load": 1.0,
                    "damage check (reads every row)": 11.0,
                    "no-change check (walk, hash)": 8.0,
                    "copy the index": 20.0,
                    "write the vector file": 30.0,
                    "pipeline (walk, hash, write, FTS)": 12.0,
                    "the whole command": 70.0,
                }
            },
        },
        "daemon": {"peak_rss": 3e9},
    }


def test_the_wall_is_the_wait_furthest_over_its_budget(bench: ModuleType) -> None:
    text = bench.next_wall(figures(search_s=3.0, noop_s=8.0, changed_s=70.0))
    assert "Furthest over its budget: one changed file, 70.0 s" in text
    # The three largest phases, largest first; the whole command is not a phase.
    assert "write the vector file 30.0 s, copy the index 20.0 s, pipeline" in text
    assert "whole command" not in text
    assert "daemon 3.00 GB" in text and "15.0 GB at ten times" in text
    assert "stale" not in text

    text = bench.next_wall(figures(search_s=9.0, noop_s=1.0, changed_s=2.0))
    assert "Furthest over its budget: cold search, 9.0 s" in text

    # A no-op's own phases only, from the profiled one-file run.
    text = bench.next_wall(figures(search_s=0.5, noop_s=12.0, changed_s=11.0))
    assert "Furthest over its budget: no-op re-index, 12.0 s" in text
    assert (
        "damage check (reads every row) 11.0 s, no-change check (walk, hash) 8.0 s, "
        "model load 1.0 s (profiled run" in text
    )


def test_a_search_reading_every_vector_after_the_daemon_is_called_out(bench: ModuleType) -> None:
    r = figures(search_s=3.0, noop_s=8.0, changed_s=70.0)
    r["search_after_daemon"] = {
        "seconds": 27.6,
        "peak_rss": 7.8e9,
        "phases": {"vectors read from DuckDB": 21.0, "the whole command": 27.0},
    }
    text = bench.next_wall(r)
    assert "the next cold search took 27.6 s and 7.80 GB, 21.0 s of it reading" in text


@pytest.mark.parametrize("args", [["--chunks", "0"], ["--searches", "0"]])
def test_bad_sizes_exit_2(bench: ModuleType, args: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(args)
    assert exit_info.value.code == 2


def test_a_profiled_cold_search_leaves_its_profile_and_its_hits(
    bench: ModuleType, small_example: Path, model: Any, tmp_path: Path
) -> None:
    """The console script ends a search with os._exit, which `python -m cProfile` never
    survived to write its stats; the bench's own runner calls the app as a library does."""
    from gbr.actors.pipeline import IndexOptions, run_index

    db = tmp_path / "index.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    profile = tmp_path / "search.prof"
    out = bench.cold_search("validate_isbn13", db, dict(os.environ), profile)
    assert profile.is_file()
    assert out["hits"] and out["phases"]
