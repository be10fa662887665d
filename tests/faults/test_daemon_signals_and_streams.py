"""Issue 32, item 11: a daemon whose terminal closes stops cleanly; one whose reader leaves
keeps serving.

Before: SIGHUP (a closed terminal or SSH session) killed `serve` at once, with no
checkpoint and `.gbr/daemon.json` left behind; `serve PKG | true` and `serve PKG 2>&1 |
head -c 200` stopped the daemon as soon as it announced itself (rich exits the process on
EPIPE).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from gbr.access.discovery import DaemonInfo, read_discovery
from tests.conftest import CTL
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until

ALIVE_SECONDS = 3.0  # how long a daemon must keep serving after its reader left
BOUND = 60.0


@pytest.fixture
def package(indexed_small: Path) -> Path:
    """An indexed copy of the small example: the daemon's first pass changes nothing."""
    return indexed_small


def test_sighup_stops_the_daemon_cleanly(
    package: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    daemon = start_daemon(package, env=clean_env(tmp_path / "home"))
    daemons.append(daemon)
    daemon.wait_idle()

    code = daemon.stop(signal.SIGHUP, timeout=BOUND)

    assert code == 0, daemon.log_text()
    assert read_discovery(daemon.db) is None  # daemon.json removed
    log = daemon.log_text()
    assert '"signal": "SIGHUP"' in log and "checkpoint_written" in log, log


def test_sighup_is_ignored_by_a_daemon_started_with_nohup(
    package: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    """`nohup gleambrctl serve`: started to outlive its terminal, it keeps serving."""
    daemon = start_daemon(package, env=clean_env(tmp_path / "home"), shell="trap '' HUP")
    daemons.append(daemon)
    daemon.wait_idle()

    daemon.proc.send_signal(signal.SIGHUP)
    time.sleep(ALIVE_SECONDS)

    assert daemon.proc.poll() is None
    assert daemon.get("/health").json()["status"] == "ok"
    assert daemon.stop(timeout=BOUND) == 0
    assert read_discovery(daemon.db) is None


def _serve(package: Path, home: Path, stderr: int | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [CTL, "serve", str(package), "--port", "0", "--json-logs"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=clean_env(home),
    )


def _running(proc: subprocess.Popen[bytes], db: Path) -> RunningDaemon:
    """Once `proc` has published itself and answers /health."""

    def published() -> DaemonInfo | None:
        assert proc.poll() is None, f"the daemon exited with {proc.returncode}"
        info = read_discovery(db)
        return info if info is not None and info.pid == proc.pid else None

    info = wait_until(published, "the discovery file")
    daemon = RunningDaemon(proc, db.parent.parent, info, db.parent / "events.jsonl")

    def healthy() -> bool:
        assert proc.poll() is None, f"the daemon exited with {proc.returncode}"
        return daemon.get("/health").status_code == 200

    wait_until(healthy, "/health")
    return daemon


def _keeps_serving_then_stops(
    proc: subprocess.Popen[bytes], package: Path, daemons: list[RunningDaemon]
) -> None:
    """`proc`, whose reader has left, serves for ALIVE_SECONDS and then stops cleanly."""
    daemon = _running(proc, package / ".gbr" / "index.duckdb")
    daemons.append(daemon)
    daemon.wait_idle()
    deadline = time.monotonic() + ALIVE_SECONDS
    while time.monotonic() < deadline:
        assert daemon.proc.poll() is None, f"the daemon exited with {daemon.proc.returncode}"
        assert daemon.get("/health").json()["status"] == "ok"
        time.sleep(0.2)
    assert daemon.names("isbn")  # still searching
    assert daemon.stop(timeout=BOUND) == 0
    assert read_discovery(daemon.db) is None


def test_a_closed_stdout_does_not_stop_the_daemon(
    package: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    """`serve PKG 2>/dev/null | true`: the reader is gone before the daemon says where it is."""
    proc = _serve(package, tmp_path / "home", subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.close()  # `true` exits at once

    _keeps_serving_then_stops(proc, package, daemons)


def test_a_reader_that_leaves_mid_log_does_not_stop_the_daemon(
    package: Path, tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    """`serve PKG 2>&1 | head -c 200`: 200 bytes of the log are read, then the pipe closes;
    the log goes on in events.jsonl."""
    proc = _serve(package, tmp_path / "home", subprocess.STDOUT)
    assert proc.stdout is not None
    assert len(proc.stdout.read(200)) == 200
    proc.stdout.close()

    _keeps_serving_then_stops(proc, package, daemons)

    events = (package / ".gbr" / "events.jsonl").read_text()
    assert "daemon_stopped" in events.splitlines()[-1]  # logging went on to the end
