"""`gleambrctl open`: the page of a running daemon in the browser, found as every command
finds its daemon; `BROWSER` is a script that writes down what it was asked to open."""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CTL, copy_small
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon

TOKEN = "tok-open-cmd-7f3a"


def browser_script(folder: Path, exit_code: int = 0) -> tuple[Path, Path]:
    """A BROWSER command that writes its argument to a file; (the command, the file)."""
    opened = folder / "opened.txt"
    script = folder / f"browser-{exit_code}.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\nexit {exit_code}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, opened


def ctl(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def on_a_terminal(*args: str, cwd: Path, env: dict[str, str]) -> str:
    """What `gleambrctl ARGS` prints with its stdout on a terminal (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [CTL, *args], cwd=cwd, env=env, stdout=follower, stderr=subprocess.DEVNULL
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(60) == 0
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return b"".join(chunks).decode().strip()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """`serve` on a copy of the small example, with a token."""
    base = tmp_path_factory.mktemp("open")
    root = copy_small(base / "small")
    env = clean_env(base / "home", GBR_TOKEN=TOKEN)
    running = start_daemon(root, env=env, token=TOKEN)
    try:
        yield running
    finally:
        running.stop()


def test_open_finds_the_daemon_from_inside_the_package(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    script, opened = browser_script(tmp_path)
    env = clean_env(tmp_path / "home", GBR_TOKEN=TOKEN, BROWSER=str(script))
    done = ctl("open", cwd=daemon.root / "src", env=env)  # no PATH: the index upwards
    assert done.returncode == 0, done.stderr
    assert opened.read_text() == f"{daemon.url}/?token={TOKEN}"
    assert done.stdout == "" and TOKEN not in done.stderr
    assert f"opened {daemon.url}/" in done.stderr

    opened.unlink()
    del env["GBR_TOKEN"]  # the page then asks for the token itself
    done = ctl("open", str(daemon.root), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert opened.read_text() == f"{daemon.url}/"
    assert "it asks for the token" in done.stderr


def test_print_and_json_show_the_token_only_on_a_terminal(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    env = clean_env(tmp_path / "home", GBR_TOKEN=TOKEN, BROWSER="/bin/false")
    printed = ctl("open", str(daemon.root), "--print", cwd=tmp_path, env=env)
    assert printed.returncode == 0 and printed.stdout == f"{daemon.url}/\n"
    shown = ctl("open", str(daemon.root), "--json", cwd=tmp_path, env=env)
    report = json.loads(shown.stdout)
    assert report.pop("schema_version") and report.pop("package") == "bookshelf"
    assert report == {
        "url": f"{daemon.url}/",
        "pid": daemon.proc.pid,
        "root": str(daemon.root.resolve()),
        "token_required": True,
    }
    terminal = on_a_terminal("open", str(daemon.root), "--print", cwd=tmp_path, env=env)
    assert terminal == f"{daemon.url}/?token={TOKEN}"


def test_a_browser_that_fails_is_one_line_without_the_token(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    script, opened = browser_script(tmp_path, exit_code=3)
    env = clean_env(tmp_path / "home", GBR_TOKEN=TOKEN, BROWSER=str(script))
    done = ctl("open", str(daemon.root), cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert opened.read_text() == f"{daemon.url}/?token={TOKEN}"  # it was asked, and failed
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"open {daemon.url}/ yourself" in done.stderr and TOKEN not in done.stderr


def test_without_a_daemon_it_says_how_to_start_one(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "pkg with space")
    script, opened = browser_script(tmp_path)
    env = clean_env(tmp_path / "home", BROWSER=str(script))
    done = ctl("open", str(root), cwd=tmp_path, env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"start one with `gleambrctl serve '{root}' --open`" in done.stderr
    assert not opened.exists()

    # A dead daemon's file is noticed and removed, and the answer is the same.
    gbr = root / ".gbr"
    gbr.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (gbr / "daemon.json").write_text(
        json.dumps(
            {
                "pid": dead.pid,
                "host": "127.0.0.1",
                "port": 9,
                "db": str(gbr / "index.duckdb"),
                "root": str(root),
                "started_at": 0,
                "token_required": False,
            }
        )
    )
    done = ctl("open", cwd=root, env=env)  # no index file: the folder it runs in
    assert done.returncode == 1
    assert "removed a stale daemon.json" in done.stderr and "gleambrctl serve" in done.stderr
    assert not (gbr / "daemon.json").exists() and not opened.exists()

    missing = ctl("open", str(tmp_path / "nowhere"), cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
