"""A daemon out of file descriptors (issue 15, item 8): a real process with a low limit.

Before: each failed accept() printed a plain-text asyncio traceback, about 2,000 a second
(4.5 MB of stderr in 5 s with `ulimit -n 120`), and a client in the listen queue got no
answer at all. Now: a few JSON lines with counts, a 503 for whoever waits, and service
again as soon as connections close.
"""

from __future__ import annotations

import json
import resource
import socket
from pathlib import Path

from tests.conftest import copy_small
from tests.daemon.conftest import RunningDaemon, clean_env, start_daemon, wait_until

FD_LIMIT = 64  # an idle daemon over the small example uses about 20
MOST_HELD = 4 * FD_LIMIT  # connections held at the most, opened a batch at a time
BATCH = 16


def get_health(port: int, timeout: float = 20) -> tuple[int, dict[str, object]]:
    """GET /health on a fresh connection: the status and the JSON body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        data = b""
        while not data.rstrip().endswith(b"}"):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_out_of_descriptors_it_logs_a_few_lines_answers_503_and_recovers(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 2 * MOST_HELD  # this side has room
    root = copy_small(tmp_path / "small")
    daemon = start_daemon(root, env=clean_env(tmp_path / "home"), shell=f"ulimit -n {FD_LIMIT}")
    daemons.append(daemon)
    daemon.wait_first_pass()
    port = daemon.info.port
    logged_before = len(daemon.log_text())
    held: list[socket.socket] = []
    try:
        # Until every descriptor is taken (how many the daemon has free varies a little):
        # then a new client is answered at once, and told why. Before, it got no answer.
        status, body = 0, {}
        while status != 503 and len(held) < MOST_HELD:
            for _ in range(BATCH):
                held.append(socket.create_connection(("127.0.0.1", port), timeout=20))
            status, body = get_health(port)
        assert status == 503, body
        assert body["type"] == "OverloadedError" and "file descriptors" in str(body["error"])
        # One line for the first failure, then one line per interval with the count.
        wait_until(lambda: '"log_repeated"' in daemon.log_text(), "a log line with a count")
        assert daemon.proc.poll() is None
    finally:
        for sock in held:
            sock.close()
    assert wait_until(lambda: get_health(port, timeout=5)[0] == 200, "/health again", 60)
    assert daemon.search("isbn", mode="bm25")["results"]
    logged = daemon.log_text()[logged_before:]
    assert len(logged) < 20_000, f"{len(logged)} bytes of log while out of descriptors"
    lines = logged.splitlines()
    assert not [line for line in lines if not line.startswith("{")], lines[:5]
    events = [json.loads(line) for line in lines]
    repeated = [e for e in events if e["event"] == "log_repeated"]
    assert repeated and all(e["count"] >= 1 for e in repeated)
    assert any(e["event"] == "connections_shed" for e in events)
    first = next(e for e in events if e["event"] == "event_loop_error")
    assert "Too many open files" in first["error"] and "traceback" not in first
