"""GBR_TEST_WORDS through `gleambrctl index`: the words reach the index a search reads, and
a value gbr cannot read stops the run before any work with the fix, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import CTL, PROVIDER_VARS, invoke, write_tree
from tests.core.test_test_words import LIBRARY, write_package


def index(root: Path, home: Path, value: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    return subprocess.run(
        [CTL, "index", str(root)],
        env={**env, "GBR_HOME": str(home), "NO_COLOR": "1", "GBR_TEST_WORDS": value},
        capture_output=True,
        text=True,
        timeout=600,
    )


def names(root: Path, query: str) -> list[str]:
    done = invoke("search", query, "--mode", "bm25", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    return [hit["name"] for hit in json.loads(done.stdout)["results"]]


def test_index_with_test_words_on_then_off(tmp_path: Path) -> None:
    root = write_package(tmp_path / "pkg")
    assert index(root, tmp_path / "home", "on").returncode == 0
    assert "remove" in names(root, "expired")
    # Turned off with no file changed: the next run takes the words back.
    assert index(root, tmp_path / "home", "off").returncode == 0
    assert "remove" not in names(root, "expired")


def test_a_value_gbr_cannot_read_stops_the_run_with_the_fix(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "pkg",
        {"gleam.toml": 'name = "pkg"\nversion = "1.0.0"\n', "src/cookie.gleam": LIBRARY},
    )
    done = index(root, tmp_path / "home", "lots")
    assert done.returncode == 2
    assert "GBR_TEST_WORDS='lots'" in done.stderr and "6,16" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / ".gbr" / "index.duckdb").exists()
