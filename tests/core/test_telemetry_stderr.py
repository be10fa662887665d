"""Logging to stderr never raises and never waits long: real pipes, a dead or a stalled reader."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator

import pytest

from gbr.core.telemetry import StderrTarget, render_human, render_json

STALL = 0.3


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):  # closed by the test already
            os.close(fd)


def test_a_pipe_whose_reader_is_gone_is_dropped_without_raising(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    target = StderrTarget(write_end, stall_seconds=STALL)
    target.write_line("first")
    assert os.read(read_end, 100) == b"first\n"
    os.close(read_end)  # `tee` died
    target.write_line("second")  # EPIPE, swallowed
    assert not target.alive
    target.write_line("third")  # not even tried


def test_a_reader_that_stopped_reading_costs_one_bounded_wait(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    target = StderrTarget(write_end, stall_seconds=STALL)
    started = time.monotonic()
    for _ in range(40):  # 40 lines of 200 bytes do not fit in 4 KiB
        target.write_line("x" * 199)
    elapsed = time.monotonic() - started
    assert target.alive  # stalled, not dead
    assert elapsed < 30  # one wait of STALL, then none (a blocking write would hang here)
    buffered = os.read(read_end, 1 << 16)
    assert buffered and set(buffered.split(b"\n")[0]) == {ord("x")}
    target.write_line("after")  # room again: written at once
    assert os.read(read_end, 100).endswith(b"after\n")


def test_the_two_renderings_of_one_event() -> None:
    event = {
        "event": "daemon_started",
        "level": "info",
        "timestamp": "2026-12-01T05:30:12.123456Z",
        "url": "http://127.0.0.1:7717",
        "pid": 42,
        "root": "/tmp/my package",
    }
    assert json.loads(render_json(event)) == event
    assert render_human(event) == (
        '05:30:12 info    daemon_started pid=42 root="/tmp/my package" url=http://127.0.0.1:7717'
    )
    failed = {"event": "boom", "level": "error", "traceback": "Traceback:\n  line 1\n"}
    assert render_human(failed) == "error   boom\n    Traceback:\n      line 1"
