"""Structured events (structlog, one JSON object per line) for what a run did and suffered.

Events are a record, never a reason to fail: a folder that cannot hold them, a file that
cannot be opened or a disk that fills up mid-run costs one warning line on stderr, and the
run goes on without them.
"""

from __future__ import annotations

import atexit
import contextlib
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import structlog

EVENTS_FILE = "events.jsonl"
Warn = Callable[[str], None]


def _stderr_line(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


class _JsonLinesSink:
    """Writes each rendered event to this process's events file and, when asked, to stderr."""

    def __init__(self, echo: bool, warn: Warn) -> None:
        self._echo = echo
        self._warn = warn

    def msg(self, message: str) -> None:
        with _state.lock:
            handle = _state.handle
            if handle is not None:
                try:
                    handle.write(message + "\n")
                    handle.flush()
                except OSError as exc:  # a full disk, a file made unwritable mid-run
                    _state.handle = None
                    _close_quietly(handle)
                    self._warn(_cannot_write(Path(handle.name), exc))
            if self._echo:
                sys.stderr.write(message + "\n")
                sys.stderr.flush()

    debug = info = warning = error = critical = exception = log = msg


class _State:
    """What this process configured: events are set up once, and their file is closed."""

    def __init__(self) -> None:
        self.key: tuple[Path | None, bool] | None = None
        self.handle: TextIO | None = None
        self.lock = threading.RLock()  # a warning may log


_state = _State()


def events_beside(db: Path) -> Path | None:
    """Where the events of an index go: beside it, unless the "index" is not a plain file
    (`--db /dev/null` must not make a `/dev/events.jsonl`; opening it fails with its own
    one-line error anyway)."""
    try:
        mode = db.stat().st_mode
    except FileNotFoundError:
        return db.parent / EVENTS_FILE
    except OSError:
        return None
    return db.parent / EVENTS_FILE if stat.S_ISREG(mode) else None


def configure(
    events_path: Path | None = None, echo: bool = False, warn: Warn | None = None
) -> None:
    """Send events to `events_path` (appending) and, with echo, to stderr as JSON lines.

    Done once per process: calling again with the same settings changes nothing, and other
    settings close the file opened before. When the file cannot be used, `warn` (by
    default a line on stderr) hears why once, and events are dropped.
    """
    warn = warn or _stderr_line
    with _state.lock:
        key = (events_path, echo)
        if _state.key == key:
            return
        _close_quietly(_state.handle)
        _state.handle = None
        if events_path is not None:
            _state.handle = _open_events(events_path, warn)
        _state.key = key
        sink = _JsonLinesSink(echo, warn)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        logger_factory=lambda *args: sink,
        cache_logger_on_first_use=False,
    )


def _open_events(path: Path, warn: Warn) -> TextIO | None:
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
        if path.exists() and not path.is_file():
            raise IsADirectoryError(f"{path} is not a regular file")
        return open(path, "a", encoding="utf-8")  # closed by close(), or at exit
    except OSError as exc:
        warn(_cannot_write(path, exc))
        return None


def close() -> None:
    """Close the events file (at exit, or before a test removes its folder)."""
    with _state.lock:
        _close_quietly(_state.handle)
        _state.handle = None
        _state.key = None


def _close_quietly(handle: TextIO | None) -> None:
    if handle is not None:
        with contextlib.suppress(OSError):
            handle.close()


def _cannot_write(path: Path, exc: OSError) -> str:
    why = exc.strerror or str(exc) or type(exc).__name__
    return f"cannot write telemetry events to {path} ({why}); the run goes on without them"


atexit.register(close)


def log() -> Any:
    return structlog.get_logger("gbr")
