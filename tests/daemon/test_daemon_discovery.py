"""daemon.json: written atomically, validated, and cleaned when its daemon is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gbr.access.discovery import (
    DaemonInfo,
    DaemonLock,
    discovery_path,
    find_daemon,
    read_discovery,
    remove_discovery,
    write_discovery,
)
from gbr.core.errors import DaemonError


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def info_for(db: Path, pid: int, port: int = 1) -> DaemonInfo:
    return DaemonInfo(pid, "127.0.0.1", port, str(db), str(db.parent.parent), 0.0, False)


def test_write_read_round_trip_and_url(tmp_path: Path) -> None:
    db = tmp_path / ".gbr" / "index.duckdb"
    db.parent.mkdir()
    info = info_for(db, os.getpid(), 4242)
    path = write_discovery(info)
    assert path == discovery_path(db) == db.parent / "daemon.json"
    assert json.loads(path.read_text())["port"] == 4242
    assert read_discovery(db) == info
    assert info.url == "http://127.0.0.1:4242"
    assert DaemonInfo(1, "0.0.0.0", 9, "", "", 0, True).url == "http://127.0.0.1:9"
    assert DaemonInfo(1, "::1", 9, "", "", 0, True).url == "http://[::1]:9"
    assert [p.name for p in db.parent.iterdir()] == ["daemon.json"]  # no temporary left


def test_a_dead_pid_makes_the_file_stale_and_it_is_removed(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    write_discovery(info_for(db, dead_pid()))
    heard: list[str] = []
    assert find_daemon(db, on_stale=lambda info, why: heard.append(why)) is None
    assert not discovery_path(db).exists()
    assert heard and "is gone" in heard[0]


def test_a_live_pid_that_does_not_answer_is_stale_too(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    write_discovery(info_for(db, os.getpid(), port=9))  # nothing listens on port 9
    assert find_daemon(db, timeout=0.5) is None
    assert not discovery_path(db).exists()


def test_a_daemon_that_holds_its_lock_but_is_slow_to_answer_is_not_removed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "index.duckdb"
    lock = DaemonLock(db)
    lock.acquire()
    try:
        write_discovery(info_for(db, os.getpid(), port=9))  # alive, locked, not answering
        with pytest.raises(DaemonError, match=r"is not answering.*try again"):
            find_daemon(db, timeout=0.5)
        assert discovery_path(db).exists()  # its clients can still find it once it answers
    finally:
        lock.release()
    assert find_daemon(db, timeout=0.5) is None  # the lock is free: now it is stale
    assert not discovery_path(db).exists()


@pytest.mark.parametrize("content", ["{not json", '{"pid": "12"}', "[]"])
def test_a_malformed_file_is_removed(tmp_path: Path, content: str) -> None:
    db = tmp_path / "index.duckdb"
    discovery_path(db).write_text(content)
    assert find_daemon(db) is None
    assert not discovery_path(db).exists()


def test_remove_with_a_pid_leaves_another_daemons_file_alone(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    write_discovery(info_for(db, 12345))
    assert not remove_discovery(db, pid=999)
    assert remove_discovery(db, pid=12345)
    assert not discovery_path(db).exists()


def test_the_lock_refuses_a_second_holder_until_released(tmp_path: Path) -> None:
    db = tmp_path / "index.duckdb"
    first, second = DaemonLock(db), DaemonLock(db)
    first.acquire()
    with pytest.raises(DaemonError, match=f"already serving .*pid {os.getpid()}"):
        second.acquire()
    first.release()
    second.acquire()
    second.release()
