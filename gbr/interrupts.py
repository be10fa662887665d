"""Ctrl-C and SIGTERM end a one-shot run (`gleambrctl index`) within a bound, in any stage.

Why a bound is needed: the pipeline's pykka actors run on their own threads, and an actor
busy with one message (an ONNX pass over a big batch, tree-sitter on a 10 MB file, a long
transaction) sees a stop request only after it. The pipeline's cleanup then waited up to
30 s per actor, and Python's exit joins every non-daemon thread, so a run went on for
minutes after printing "interrupted".

Here the first signal does two things. The main thread gets a KeyboardInterrupt, so the
pipeline asks its writer to show the index as written so far (a staged run copies its file
over the index: what it finished is kept, as the last line says) and stops without waiting
for busy actors; and a watchdog thread, woken through `signal.set_wakeup_fd` (written by the
C-level handler, so it fires even while the main thread is stuck in a long C call), ends the
process with `os._exit` after GRACE_SECONDS whatever is still running. The grace is longer
than the pipeline's KEEP_SECONDS: a grace of 0.5 s ended runs before they kept anything.
Ending mid-write is safe: each file's chunks are swapped in one DuckDB transaction, so the
index holds the old or the new version of every file, the full-text index is flagged stale
before the first write, and the next run finishes the job.

Exit codes, as shells report a death by signal: 130 for SIGINT (128 + 2), 143 for
SIGTERM (128 + 15). A second signal exits at once. Either way stderr gets one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType

GRACE_SECONDS = 6.0  # > gbr.actors.pipeline.KEEP_SECONDS, the time to keep finished work
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SHOW_CURSOR = "\x1b[?25h"  # a progress bar cut off mid-draw leaves the cursor hidden

_lock = threading.Lock()
_state: dict[str, object] = {"installed": False, "signum": None, "message": "", "raised": False}


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by SIGINT or SIGTERM; the signal decides the exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int) -> int:
    return 128 + signum


def installed() -> bool:
    return bool(_state["installed"])


def signalled() -> bool:
    """Whether SIGINT or SIGTERM has arrived: an error raised after it is its echo (DuckDB
    answers a signal that lands inside a statement with "Query interrupted")."""
    return _state["signum"] is not None


def install(message: str) -> None:
    """Handle SIGINT and SIGTERM for the rest of the process; call from the main thread.

    `message` is the one line printed on the way out.
    """
    if installed() or threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    _state["message"] = message
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_end,), name="gbr-interrupts", daemon=True).start()
    for signum in _SIGNALS:
        signal.signal(signum, _on_signal)
    _state["installed"] = True


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the first signal unwinds the main thread gracefully."""
    with _lock:
        # Not `signum is None`: the watchdog may have read the same signal's wakeup byte
        # first (the main thread waits for the GIL behind a big parse), and that signal
        # taken for a second one ended the run before it kept anything. The watchdog
        # counts the signals themselves, and ends the process on the second.
        first = not _state["raised"]
        _state["raised"] = True
        if _state["signum"] is None:
            _state["signum"] = signum
    if not first:
        exit_now()
    raise Interrupted(signum)


def _watch(read_end: int) -> None:
    """Wait for a signal byte, give the graceful stop GRACE_SECONDS, then end the process."""
    deadline: threading.Timer | None = None
    while True:
        try:
            data = os.read(read_end, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in _SIGNALS:
                continue
            with _lock:
                if _state["signum"] is None:
                    _state["signum"] = signum
            if deadline is not None:
                exit_now()  # a second signal
            deadline = threading.Timer(GRACE_SECONDS, exit_now)
            deadline.daemon = True
            deadline.start()


def exit_now() -> None:
    """Print the one line (once), flush, and end the process with the signal's exit code."""
    signum = _state["signum"]
    code = exit_code(signum) if isinstance(signum, int) else 130
    if _lock.acquire(timeout=0.5):
        line = f"{_state['message']} ({signal.Signals(code - 128).name})\n"
        with contextlib.suppress(Exception):
            _log_interrupted(code)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            if sys.stderr.isatty():
                sys.stderr.write(_SHOW_CURSOR)
            sys.stderr.write(line)
            sys.stderr.flush()
    os._exit(code)


def _log_interrupted(code: int) -> None:
    from gbr.core.telemetry import log

    log().info("interrupted", exit_code=code, signal=signal.Signals(code - 128).name)
