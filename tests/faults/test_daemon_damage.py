"""Issue 32, item 15 (left by issue 15): a damaged block met by the daemon is the one-line
damage error, as the CLI says it, and not a write to retry.

Before: a daemon serving an index with a damaged block in its chunks (a checksum that fails)
said, on `/health` and to `gleambrctl index` through it, "cannot write the index …: Corrupt
database file: computed checksum … ; check the disk and the permissions of …", and retried
the pass for ever; the rebuild that fixes it was named nowhere.
"""

from __future__ import annotations

from pathlib import Path

from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until
from tests.faults.files_faults_helpers import ctl, garbage_in_the_middle, one_error_line

DAMAGE = "is damaged (checksum mismatch in block at location"


def test_a_damaged_block_met_by_the_daemon_is_the_one_line_damage_error(
    indexed_small: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = indexed_small
    db = root / ".gbr" / "index.duckdb"
    garbage_in_the_middle(db)
    home = tmp_path / "home"
    daemon = start_daemon(root, env=clean_env(home))
    daemons.append(daemon)
    fix = f"run `gleambrctl index --rebuild {root}`"

    health = wait_until(
        lambda: (h := daemon.get("/health").json())["status"] == "degraded" and h,
        "/health to report the damage",
    )
    [part] = health["degraded"]
    assert DAMAGE in part["reason"] and fix in part["reason"], part
    assert "cannot write" not in part["reason"]

    indexed = ctl("index", str(root), home=home)
    line = one_error_line(indexed)
    assert "through the daemon" in indexed.stderr  # the daemon met it, not this process
    assert DAMAGE in line and fix in line, line
    assert "cannot write" not in line

    found = daemon.post("/search", {"query": "isbn", "mode": "bm25"})
    assert found.status_code == 503
    assert found.json()["type"] == "IndexCorruptError" and fix in found.json()["error"]
    assert "Traceback" not in daemon.log_text()
    assert daemon.stop() == 0
