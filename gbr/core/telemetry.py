"""Structured events (structlog, one JSON object per line) for what a run did and suffered."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, TextIO

import structlog


class _JsonLinesSink:
    """Writes each rendered event to the events file and, when asked, to stderr."""

    def __init__(self, files: list[TextIO]) -> None:
        self._files = files
        self._lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            for handle in self._files:
                handle.write(message + "\n")
                handle.flush()

    debug = info = warning = error = critical = exception = log = msg


def configure(events_path: Path | None = None, echo: bool = False) -> None:
    """Send events to `events_path` (appending) and, with echo, to stderr as JSON lines."""
    files: list[TextIO] = []
    if events_path is not None:
        events_path.parent.mkdir(parents=True, exist_ok=True)
        files.append(open(events_path, "a", encoding="utf-8"))  # noqa: SIM115 - lives for the process
    if echo:
        files.append(sys.stderr)
    sink = _JsonLinesSink(files)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        logger_factory=lambda *args: sink,
        cache_logger_on_first_use=False,
    )


def log() -> Any:
    return structlog.get_logger("gbr")
