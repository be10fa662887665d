"""The daemon out of file descriptors: one log line per interval, and a 503 for who waits.

When every descriptor is taken (clients holding connections open, a low `ulimit -n`),
asyncio's accept() fails with EMFILE. On Python 3.11 its accept loop then neither stops
nor sleeps: each failed accept is logged with a traceback and schedules another try, so
stderr took 171k tracebacks (69 MB) in 5 s, and a client waiting in the listen queue got
no answer at all. Here the event loop's errors go through `LoopErrors`: the first of a
kind is one JSON line, the rest are counted and reported once per interval; and each
failed accept takes one waiting connection with a descriptor kept in reserve, answers it
503 with `Retry-After`, and closes it. Once descriptors return, accept() succeeds again
(asyncio retries it every second) and the daemon serves as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
import threading
import time
import traceback
from typing import Any

from gbr.core.telemetry import log

LOG_INTERVAL_SECONDS = 5.0
RETRY_SECONDS = 5
EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
SHED_MESSAGE = (
    "the daemon is out of file descriptors (too many connections are open); retry in a few "
    "seconds, or raise its limit (`ulimit -n`) and restart it"
)


def shed_response() -> bytes:
    """A whole HTTP/1.1 503 in the daemon's error shape, sent without reading the request."""
    body = json.dumps({"error": SHED_MESSAGE, "type": "OverloadedError"}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {RETRY_SECONDS}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class Throttle:
    """Counts events by kind; says which to log now (the first of an interval)."""

    def __init__(self, interval: float = LOG_INTERVAL_SECONDS) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def admit(self, kind: str) -> bool:
        """True for the first event of `kind` in an interval; later ones are only counted."""
        now = time.monotonic()
        with self._lock:
            if now - self._since.get(kind, float("-inf")) >= self.interval:
                self._since[kind] = now
                return True
            self._held[kind] = self._held.get(kind, 0) + 1
            return False

    def holding(self) -> bool:
        with self._lock:
            return bool(self._held)

    def drain(self) -> dict[str, int]:
        """The events held back since the last drain, by kind."""
        with self._lock:
            held, self._held = self._held, {}
        return held


def report_held(throttle: Throttle) -> None:
    for kind, count in throttle.drain().items():
        log().warning(
            "log_repeated", kind=kind, count=count, seconds=throttle.interval, note="not logged"
        )


class Reserve:
    """One descriptor held back (on /dev/null), so a connection can be taken and refused
    when there is none left to accept it with."""

    def __init__(self) -> None:
        self.fd: int | None = self._open()
        self.shed = 0

    @staticmethod
    def _open() -> int | None:
        try:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    def shed_one(self, listener: socket.socket) -> bool:
        """Accept one waiting connection with the reserve, answer it 503, close it."""
        if self.fd is None:
            self.fd = self._open()
            if self.fd is None:
                return False
        os.close(self.fd)
        self.fd = None
        try:
            conn, _ = listener.accept()
        except OSError:  # nobody waiting, or another thread took the descriptor first
            self.fd = self._open()
            return False
        with conn:
            conn.setblocking(False)
            # What the client sent is read first: closing with unread data sends a reset,
            # and the client would see that instead of the answer.
            with contextlib.suppress(OSError):
                conn.recv(65536)
            with contextlib.suppress(OSError):
                conn.sendall(shed_response())
                conn.shutdown(socket.SHUT_WR)
        # At once, in this thread: the loop's next accept() would take it otherwise.
        self.fd = self._open()
        self.shed += 1
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LoopErrors:
    """The event loop's exception handler: throttled JSON lines, and shedding on EMFILE."""

    def __init__(self, listener: socket.socket, interval: float = LOG_INTERVAL_SECONDS) -> None:
        self.listener = listener
        self.throttle = Throttle(interval)
        self.reserve = Reserve()
        self._flush_scheduled = False

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message") or "event loop error")
        exhausted = isinstance(exc, OSError) and exc.errno in EXHAUSTED
        shed = exhausted and "accept" in message and self.reserve.shed_one(self.listener)
        kind = f"{message}: {type(exc).__name__}" if exc is not None else message
        if self.throttle.admit(kind):
            fields: dict[str, Any] = {"message": message}
            if exc is not None:
                fields["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
                if not exhausted:  # a bug: where it happened matters; exhaustion is not one
                    fields["traceback"] = "".join(traceback.format_exception(exc, limit=10))
            log().error("event_loop_error", **fields)
        if not self._flush_scheduled and (shed or self.throttle.holding()):
            self._flush_scheduled = True
            loop.call_later(self.throttle.interval, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        report_held(self.throttle)
        if self.reserve.shed:
            log().warning("connections_shed", count=self.reserve.shed, reason="no descriptors")
            self.reserve.shed = 0
