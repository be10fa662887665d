"""The daemon stops when asked, whatever became of its stderr; picks a port; logs for people.

Each test runs `gleambrctl serve` as a real process. `serve | tee` is simulated with a pipe
whose reader the test closes (tee killed by the same Ctrl-C); a terminal is a real pty.
Stop times are printed (`pytest -s`) and bounded generously, never asserted as speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gbr.access.discovery import DaemonInfo, lock_held, read_discovery
from tests.conftest import CTL, copy_small
from tests.daemon.conftest import clean_env, wait_until

START_SECONDS = 120.0  # a first start on a loaded machine loads the model and indexes
STOP_SECONDS = 60.0  # the bound on a stop; the daemon's own cut-off is 20 s
HUMAN_LINE = re.compile(
    r"^\d\d:\d\d:\d\d info +daemon_started db=\S+ pid=\d+ root=\S+ url=http://127\.0\.0\.1:\d+$"
)


class Drain:
    """Reads a descriptor on a thread, so the daemon never waits on it, until `close()`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = bytearray()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            if not select.select([self.fd], [], [], 0.1)[0]:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: nothing holds the pty's other side any more
                return
            if not chunk:
                return
            self.data.extend(chunk)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    def close(self) -> None:
        """The reader dies, as `tee` does on Ctrl-C: the daemon's next write gets EPIPE."""
        self._closing.set()
        self._thread.join(10)
        os.close(self.fd)


class Serve:
    """One `gleambrctl serve ROOT ARGS` with stdout and stderr on descriptors we give it."""

    def __init__(
        self,
        root: Path,
        *args: str,
        env: dict[str, str],
        stdout: int,
        stderr: int,
        closed: bool = False,
    ) -> None:
        self.root = root
        self.db = root / ".gbr" / "index.duckdb"
        command = [CTL, "serve", str(root), *args]
        if closed:
            # `serve >&- 2>&-`, as a user types it: the shell closes both, then execs (same
            # pid). Not a preexec_fn, which forces a fork of this (large) test process.
            command = ["/bin/sh", "-c", 'exec "$0" "$@" >&- 2>&-', *command]
        self.proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)

    def published(self, output: Drain | None = None) -> DaemonInfo:
        def check() -> DaemonInfo | None:
            if self.proc.poll() is not None:
                seen = output.text() if output is not None else ""
                raise AssertionError(f"serve exited with {self.proc.returncode}:\n{seen}")
            with contextlib.suppress(ValueError):
                info = read_discovery(self.db)
                return info if info is not None and info.pid == self.proc.pid else None
            return None

        return wait_until(check, "the discovery file", timeout=START_SECONDS)

    def stop(self, sig: int) -> float:
        """Send `sig`; how many seconds the process took to exit (fails past STOP_SECONDS)."""
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve still running {STOP_SECONDS} s after {sig!r}") from None
        return time.monotonic() - started


def port_answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(5)
        try:
            probe.connect(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_into_a_dead_tee_stops_on_a_signal_and_leaves_nothing(
    tmp_path: Path, daemons: list[Serve], sig: signal.Signals
) -> None:
    root = copy_small(tmp_path / "small")
    read_end, write_end = os.pipe()
    tee = Drain(read_end)
    daemon = Serve(
        root, "--port", "0", env=clean_env(tmp_path / "home"), stdout=write_end, stderr=write_end
    )
    os.close(write_end)
    daemons.append(daemon)
    info = daemon.published(tee)
    wait_until(lambda: "serving " in tee.text(), "the announcement")
    assert port_answers(info.port)

    tee.close()  # `| tee` died with the same Ctrl-C; every write now fails with EPIPE
    seconds = daemon.stop(sig)
    print(f"\n{sig.name} with a dead tee: stopped in {seconds:.2f} s")

    assert daemon.proc.returncode == 0
    assert not (root / ".gbr" / "daemon.json").exists()
    assert not lock_held(daemon.db)
    assert not port_answers(info.port)
    events = [
        json.loads(line) for line in (root / ".gbr" / "events.jsonl").read_text().splitlines()
    ]
    names = [e["event"] for e in events]
    assert names[-1] == "daemon_stopped"  # the events file kept what stderr could not take
    assert "checkpoint_written" in names or "checkpoint_at_close" in names
    assert "stop_forced" not in names  # a clean stop, not the cut-off


def test_serve_with_stdout_and_stderr_closed_serves_and_stops_on_ctrl_c(
    tmp_path: Path, daemons: list[Serve]
) -> None:
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home")
    daemon = Serve(
        root,
        "--port",
        "0",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        closed=True,
    )
    daemons.append(daemon)
    info = daemon.published()
    assert port_answers(info.port)

    seconds = daemon.stop(signal.SIGINT)
    print(f"\nSIGINT with stdout and stderr closed: stopped in {seconds:.2f} s")

    assert daemon.proc.returncode == 0
    assert not (root / ".gbr" / "daemon.json").exists()
    assert not lock_held(daemon.db)
    assert not port_answers(info.port)


def test_two_packages_without_port_both_serve_when_the_default_port_is_taken(
    tmp_path: Path, daemons: list[Serve]
) -> None:
    # The default port (GBR_PORT here, so that no fixed port is used) is taken.
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    default = holder.getsockname()[1]
    env = clean_env(tmp_path / "home", GBR_PORT=str(default))
    try:
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        ports = []
        for name, log in zip("ab", logs, strict=True):
            with log.open("wb") as out:
                daemon = Serve(
                    copy_small(tmp_path / name), env=env, stdout=out.fileno(), stderr=out.fileno()
                )
            daemons.append(daemon)
            ports.append(daemon.published().port)
    finally:
        holder.close()
    assert default not in ports and ports[0] != ports[1]
    for log, port in zip(logs, ports, strict=True):
        text = wait_until(lambda log=log: "serving " in log.read_text() and log.read_text(), "log")
        notes = [line for line in text.splitlines() if line.startswith("note: port")]
        assert notes == [
            f"note: port {default} is in use; listening on port {port} instead (clients "
            "find it through .gbr/daemon.json; --port fixes one)"
        ]
        assert f"at http://127.0.0.1:{port} " in text
    for daemon in daemons:
        assert daemon.stop(signal.SIGTERM) < STOP_SECONDS
        assert daemon.proc.returncode == 0


def test_an_explicit_busy_port_is_a_one_line_error(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "small")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        done = subprocess.run(
            [CTL, "serve", str(root), "--port", str(port)],
            env=clean_env(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
        )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(errors) == 1 and errors[0].startswith(f"error: cannot listen on 127.0.0.1:{port} ")
    assert errors[0].endswith("pick another --port, or 0 for a free one")
    assert not (root / ".gbr" / "daemon.json").exists()
    assert not lock_held(root / ".gbr" / "index.duckdb")


@pytest.mark.parametrize(
    ("terminal", "flag", "human"),
    [(True, None, True), (False, None, False), (True, "--json-logs", False)],
    ids=["pty", "pipe", "pty-json-logs"],
)
def test_logs_are_readable_on_a_terminal_and_json_lines_otherwise(
    tmp_path: Path, daemons: list[Serve], terminal: bool, flag: str | None, human: bool
) -> None:
    root = copy_small(tmp_path / "small")
    read_end, write_end = os.openpty() if terminal else os.pipe()
    stderr = Drain(read_end)
    with (tmp_path / "stdout").open("wb") as out:
        args = ["--port", "0", *([flag] if flag else [])]
        daemon = Serve(
            root, *args, env=clean_env(tmp_path / "home"), stdout=out.fileno(), stderr=write_end
        )
    daemons.append(daemon)
    daemon.published(stderr)
    text = wait_until(lambda: "daemon_started" in stderr.text() and stderr.text(), "a log line")
    lines = [line.rstrip("\r") for line in text.splitlines() if line.strip()]
    started = next(line for line in lines if "daemon_started" in line)
    if human:
        assert HUMAN_LINE.match(started), started
        assert not any(line.startswith("{") for line in lines), lines
    else:
        assert json.loads(started)["event"] == "daemon_started"
        assert all(json.loads(line) for line in lines)
    assert daemon.stop(signal.SIGTERM) < STOP_SECONDS
    os.close(write_end)
    stderr.close()
    assert daemon.proc.returncode == 0
