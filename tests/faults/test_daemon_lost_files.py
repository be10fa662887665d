"""Issue 32, item 10: a daemon whose files are deleted under it notices, says so, and
recreates what it can or stops.

Before: with `.gbr/` deleted, `/health` said ok, `/status` showed `db_bytes: 0`, the CLI
said "no index found" and a second `serve` started on the same package; with the package
folder deleted, `/health` stayed ok and the old hits were served for ever.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx

from gbr.access.discovery import read_discovery
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until
from tests.faults.files_faults_helpers import ctl

BOUND = 120.0  # seconds; the daemon checks every second, and a re-index of 5 files is quick


def _health(daemon: RunningDaemon) -> dict[str, Any] | None:
    """/health, or None while nothing listens (the daemon starting again)."""
    try:
        return daemon.get("/health").json()  # type: ignore[no-any-return]
    except httpx.TransportError:
        return None


def test_a_deleted_index_folder_is_noticed_reported_and_recreated(
    indexed_small: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = indexed_small
    home = tmp_path / "home"
    daemon = start_daemon(root, env=clean_env(home))
    daemons.append(daemon)
    chunks = daemon.wait_idle()["chunks"]

    shutil.rmtree(root / ".gbr")

    def degraded() -> dict[str, str] | None:
        health = _health(daemon)
        parts = health["degraded"] if health else []
        return next((p for p in parts if p["component"] == "index"), None)

    part = wait_until(degraded, "/health to say the index is being recreated", BOUND)
    assert part["state"] == "recreating"
    assert f"the index {root / '.gbr' / 'index.duckdb'} was deleted" in part["reason"]
    wait_until(lambda: (h := _health(daemon)) and h["status"] == "ok", "/health ok", BOUND)
    status = daemon.wait_idle()
    assert status["db_bytes"] > 0 and status["chunks"] == chunks
    info = read_discovery(daemon.db)
    assert info is not None and info.pid == daemon.proc.pid and info.port == daemon.info.port

    found = ctl("search", "isbn", "--mode", "bm25", "--json", cwd=root, home=home)
    assert found.returncode == 0, found.stderr
    second = subprocess.run(
        [*daemon.proc.args[:3], "--port", "0"],  # type: ignore[index]
        env=clean_env(home),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert second.returncode != 0 and "already serving" in second.stderr, second.stderr
    assert daemon.proc.poll() is None
    assert daemon.stop() == 0
    assert read_discovery(daemon.db) is None


def test_a_deleted_package_folder_stops_the_daemon_cleanly(
    indexed_small: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = indexed_small
    db = tmp_path / "elsewhere" / "index.duckdb"  # so that daemon.json outlives the package
    daemon = start_daemon(root, "--db", str(db), env=clean_env(tmp_path / "home"), db=db)
    daemons.append(daemon)
    daemon.wait_idle()

    shutil.rmtree(root)

    code = daemon.proc.wait(BOUND)
    assert code == 1
    gone = [line for line in daemon.log_text().splitlines() if "package_gone" in line]
    assert len(gone) == 1 and f"the package folder {root} is gone" in gone[0], gone
    assert read_discovery(db) is None  # daemon.json removed
    assert "checkpoint_written" in daemon.log_text()
