"""`index` with the shared embed cache and `--device`, as a user runs them: `index` in real
processes (two at once share the cache), `status`, `settings` and `search` in this one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CTL, EXAMPLE, check_cuda_warnings, invoke

SHARED = ("src/bookshelf/isbn.gleam", "src/bookshelf/ffi.gleam")


def package(root: Path, *files: str) -> Path:
    """A package of some of the example's files (a few dozen chunks: quick to embed)."""
    (root / "src/bookshelf").mkdir(parents=True)
    (root / "gleam.toml").write_text(f'name = "{root.name}"\nversion = "1.0.0"\n')
    for rel in files:
        (root / rel).write_bytes((EXAMPLE / rel).read_bytes())
    return root


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.Popen(
        [CTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def run(*args: str) -> tuple[int, str, str]:
    """`index` in a process of its own; the other commands through typer's runner."""
    if args[0] != "index":
        done = invoke(*args)
        return done.returncode, done.stdout, done.stderr
    proc = start(*args)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def index_json(root: Path, *flags: str) -> tuple[dict[str, Any], str]:
    code, out, err = run("index", str(root), "--json", *flags)
    assert code == 0, err
    return json.loads(out), err


def cache_file() -> Path:
    return Path(os.environ["GBR_HOME"]) / "embed-cache.sqlite"


def test_two_index_runs_at_once_share_the_cache_and_a_third_embeds_nothing(
    tmp_path: Path,
) -> None:
    left = package(tmp_path / "left", *SHARED, "src/bookshelf/member.gleam")
    right = package(tmp_path / "right", *SHARED, "src/bookshelf/loan.gleam")
    procs = [start("index", str(p), "--json") for p in (left, right)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in results]
    assert not any("embed cache" in err for _, err in results)
    summaries = [json.loads(out) for out, _ in results]
    assert all(s["cache_misses"] + s["cache_hits"] == s["chunks"] > 0 for s in summaries)

    both = package(
        tmp_path / "both", *SHARED, "src/bookshelf/member.gleam", "src/bookshelf/loan.gleam"
    )
    third, _ = index_json(both)
    assert third["chunks_embedded"] == 0
    assert third["cache_hits"] == third["chunks"]

    code, out, err = run("status", "--db", str(both / ".gbr/index.duckdb"), "--json")
    assert code == 0, err
    cache = json.loads(out)["embed_cache"]
    assert cache["path"] == str(cache_file())
    assert cache["rows"] >= third["chunks"] and cache["bytes"] > 0
    assert (cache["last_run_hits"], cache["last_run_misses"]) == (third["chunks"], 0)
    code, out, _ = run("status", "--db", str(both / ".gbr/index.duckdb"))
    assert f"last run {third['chunks']} hits, 0 misses" in out


def test_off_by_flag_or_by_setting(tmp_path: Path) -> None:
    first = package(tmp_path / "first", *SHARED)
    index_json(first)
    second = package(tmp_path / "second", *SHARED)
    summary, _ = index_json(second, "--no-embed-cache")
    assert (summary["cache_hits"], summary["chunks_embedded"]) == (0, summary["chunks"])

    third = package(tmp_path / "third", *SHARED)
    code, _, err = run("settings", "embed_cache", "false", "--db", str(third / ".gbr/index.duckdb"))
    assert code == 0, err
    summary, _ = index_json(third)
    assert (summary["cache_hits"], summary["chunks_embedded"]) == (0, summary["chunks"])
    code, out, _ = run("status", "--db", str(third / ".gbr/index.duckdb"))
    assert "embed cache off" in out


def test_a_garbage_cache_costs_one_warning_line_and_nothing_else(tmp_path: Path) -> None:
    root = package(tmp_path / "pkg", *SHARED)
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    garbage = os.urandom(8192)
    cache_file().write_bytes(garbage)

    summary, err = index_json(root)

    assert summary["files_indexed"] == 2 and summary["chunks_embedded"] == summary["chunks"] > 0
    lines = [line for line in err.splitlines() if "embed cache" in line]
    assert len(lines) == 1, err
    assert str(cache_file()) in lines[0] and lines[0].endswith("or set GBR_EMBED_CACHE=off")
    assert cache_file().read_bytes() == garbage
    code, out, _ = run("search", "isbn", "--db", str(root / ".gbr/index.duckdb"), "--json")
    assert code == 0 and json.loads(out)["results"]  # the index itself is whole


def test_an_unusable_cache_folder_costs_one_warning_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = package(tmp_path / "pkg", *SHARED)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where GBR_HOME should be")
    monkeypatch.setenv("GBR_HOME", str(blocker / "home"))
    summary, err = index_json(root)
    assert summary["files_indexed"] == 2 and summary["chunks_embedded"] == summary["chunks"]
    assert len([line for line in err.splitlines() if "embed cache" in line]) == 1, err


def test_device_cuda_without_a_gpu_falls_back_in_one_line_and_a_bad_one_is_refused(
    tmp_path: Path,
) -> None:
    root = package(tmp_path / "pkg", "src/bookshelf/ffi.gleam")
    summary, err = index_json(root, "--device", "cuda")
    assert summary["files_indexed"] == 1
    check_cuda_warnings([line for line in err.splitlines() if "cuda" in line.lower()])
    _, err = index_json(root, "--device", "auto")
    assert "cuda" not in err.lower()
    code, out, err = run("index", str(root), "--device", "gpu")
    assert code == 2 and out == ""
    assert err.strip() == "error: --device must be auto, cpu or cuda, not 'gpu'"
