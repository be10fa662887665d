"""The daemon load bench, run as a user runs it but tiny: its JSON must add up.

The figures themselves are the bench's business, so nothing here looks at a latency or a
throughput beyond "there was some"; only counts, shapes and orderings are checked. The
bench's exit code reflects its timing targets too, so 1 is accepted as long as the checks
that are about behaviour (no errors, every save found) passed.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, REPO
from tests.daemon.conftest import clean_env

BENCH = REPO / "bench" / "daemon_load.py"


def run_bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(tmp_path / "home"),
    )


@pytest.mark.slow  # indexes the whole example, then loads a real daemon
def test_a_tiny_run_reports_consistent_figures(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    work = tmp_path / "work"
    proc = run_bench(
        tmp_path,
        "--chunks", "0", "--duration", "0.5", "--clients", "1,3", "--saves", "2",
        "--small-saves", "0", "--unpolled-saves", "1", "--workdir", str(work), "--json", str(out),
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    r = json.loads(out.read_text())
    assert {"machine", "corpus", "daemon", "load", "saves", "checks"} <= set(r)

    assert r["corpus"]["chunks"] > 300 and r["corpus"]["files_dropped"] == 0
    assert r["corpus"]["files_partial"] == 1  # broken.gleam keeps its intact constant
    assert r["daemon"]["exit_code"] == 0  # stopped cleanly by SIGTERM

    assert [level["clients"] for level in r["load"]] == [1, 3]
    for level in r["load"]:
        assert level["errors"] == 0 and level["error_samples"] == []
        assert level["ok"] > 0 and level["requests"] == level["ok"] + level["errors"]
        assert len(level["per_client_requests"]) == level["clients"]
        assert all(n > 0 for n in level["per_client_requests"])
        assert sum(level["per_client_requests"]) == level["requests"]
        assert level["qps"] > 0
        assert 0 < level["p50_ms"] <= level["p95_ms"] <= level["p99_ms"] <= level["max_ms"]

    assert set(r["saves"]) == {"corpus"}  # --small-saves 0: no daemon on the plain example
    saves = r["saves"]["corpus"]
    assert saves["saves"] == saves["found"] == 2 and saves["timeouts"] == 0
    assert saves["poll_errors"] == 0
    assert len(saves["runs"]) == 2 and all(run["found"] for run in saves["runs"])
    assert all(run["daemon_lag_seconds"] for run in saves["runs"])  # the daemon saw each save
    assert 0 < saves["p50_s"] <= saves["max_s"]
    unpolled = saves["unpolled"]  # timed by the daemon's event, with nobody searching
    assert unpolled["saves"] == 1 and unpolled["timeouts"] == 0
    assert unpolled["runs"][0]["found"] and unpolled["runs"][0]["daemon_lag_seconds"]
    saved = work / "corpus" / saves["file"]
    assert saved.read_bytes() == (EXAMPLE / saves["file"].removeprefix("bookshelf/")).read_bytes()

    behaviour = [c for c in r["checks"] if c["name"].startswith("/search errors")]
    assert len(behaviour) == 2 and all(c["ok"] for c in behaviour)
    assert "queries/s" in proc.stdout and "save-to-searchable" in proc.stdout


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--clients", "1,x"], "--clients takes whole numbers"),
        (["--clients", "0"], "each at least 1"),
        (["--duration", "0"], "--duration and --poll-ms must be positive"),
        (["--saves", "-1"], "--unpolled-saves must be >= 0"),
        (["--unpolled-saves", "-2"], "--unpolled-saves must be >= 0"),
    ],
)
def test_bad_arguments_exit_2_with_a_reason(
    args: list[str], reason: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # the bench imports its neighbours by name
    bench = importlib.import_module("daemon_load")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(args)
    assert exit_info.value.code == 2
    assert reason in capsys.readouterr().err
