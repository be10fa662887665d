"""Structured events (structlog) for what a run did and suffered.

Events are a record, never a reason to fail: a folder that cannot hold them, a file that
cannot be opened or a disk that fills up mid-run costs one warning line on stderr, and the
run goes on without them.

The events file gets one JSON object per line. The echo on stderr is JSON lines too, or one
readable line per event for a person at a terminal (`human`). stderr is written with a
bounded wait and never raises: a pipe whose reader died (`serve | tee` after Ctrl-C) is
dropped at its first EPIPE, and a reader that stopped reading cannot hold up a shutdown.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gbr.core.lazy import lazy_module

if TYPE_CHECKING:
    import structlog
else:
    # Loaded when events are configured or first logged: a search that logs nothing does
    # not pay structlog's 0.1 s (it brings asyncio and rich's tracebacks).
    structlog = lazy_module("structlog")

EVENTS_FILE = "events.jsonl"
STALL_SECONDS = 1.0  # longest wait for stderr's reader to make room, once; then no waiting
_CHUNK = 512  # bytes per write: at most PIPE_BUF, so a write select() allowed cannot block
Warn = Callable[[str], None]


def _stderr_line(message: str) -> None:
    _state.stderr.write_line(f"warning: {message}")


# One warning line on stderr, as gbr/core modules give it when they carry on without something.
warning_line = _stderr_line


class StderrTarget:
    """Lines to a file descriptor that may be a dead pipe or a reader that stopped reading.

    A write error (EPIPE once `tee` is gone, EBADF once the descriptor was closed) stops all
    further writes, and nothing is raised. A reader that makes no room within STALL_SECONDS
    costs that wait once: from then on a line goes only if there is room at once, and is
    dropped otherwise (the events file keeps every event).
    """

    def __init__(self, fd: int | None, stall_seconds: float = STALL_SECONDS) -> None:
        self._fd = fd
        self._wait = stall_seconds

    @classmethod
    def for_stderr(cls) -> StderrTarget:
        try:
            return cls(sys.stderr.fileno())
        except (AttributeError, OSError, ValueError):  # no stderr, or a test's captured one
            return _StreamTarget(None)

    @property
    def alive(self) -> bool:
        return self._fd is not None

    def write_line(self, line: str) -> None:
        if self._fd is None:
            return
        data = (line + "\n").encode("utf-8", "replace")
        deadline = time.monotonic() + self._wait
        try:
            while data:
                room = select.select([], [self._fd], [], max(0.0, deadline - time.monotonic()))[1]
                if not room:
                    self._wait = 0.0  # stalled: never wait again
                    return
                data = data[os.write(self._fd, data[:_CHUNK]) :]
        except (OSError, ValueError):
            self._fd = None


class _StreamTarget(StderrTarget):
    """sys.stderr as a stream, when it has no descriptor (pytest's capture): errors drop it."""

    def __init__(self, fd: int | None) -> None:
        super().__init__(fd)
        self._dead = False

    @property
    def alive(self) -> bool:
        return not self._dead

    def write_line(self, line: str) -> None:
        if self._dead:
            return
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            self._dead = True


def render_json(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, default=repr)


def render_human(event: dict[str, Any]) -> str:
    """`05:30:12 info    daemon_started pid=4242 url=http://127.0.0.1:7717`, for a terminal.

    Values with spaces or quotes are quoted; a traceback goes on the lines after, indented.
    """
    fields = dict(event)
    stamp = str(fields.pop("timestamp", ""))[11:19]
    level = str(fields.pop("level", "info"))
    name = str(fields.pop("event", ""))
    trace = fields.pop("traceback", None)
    parts = [f"{key}={_human_value(value)}" for key, value in sorted(fields.items())]
    line = " ".join(p for p in (stamp, f"{level:<7}", name, *parts) if p)
    if trace:
        line += "\n" + "\n".join("    " + t for t in str(trace).rstrip().splitlines())
    return line


def _human_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    if not text or any(c.isspace() or c in "\"'=" for c in text):
        return json.dumps(text)
    return text


class _Sink:
    """Writes each event to this process's events file and, when asked, to stderr."""

    def __init__(self, echo: bool, human: bool, warn: Warn, least: str = "debug") -> None:
        self._echo = echo
        self._human = human
        self.warn = warn
        self._least = _LEVELS.index(least)  # events below this level are not echoed

    def msg(self, **event: Any) -> None:
        with _state.lock:
            handle = _state.handle
            line = render_json(event)
            if handle is not None:
                try:
                    handle.write(line + "\n")
                    handle.flush()
                except OSError as exc:  # a full disk, a file made unwritable mid-run
                    _state.handle = None
                    _close_quietly(handle)
                    self.warn(_cannot_write(Path(handle.name), exc))
            if self._echo and self._loud_enough(event):
                _state.stderr.write_line(render_human(event) if self._human else line)

    def _loud_enough(self, event: dict[str, Any]) -> bool:
        level = str(event.get("level", "info"))
        return _LEVELS.index(level) >= self._least if level in _LEVELS else True

    debug = info = warning = error = critical = exception = log = msg


_LEVELS = ("debug", "info", "warning", "error", "critical")


class _State:
    """What this process configured: events are set up once, and their file is closed."""

    def __init__(self) -> None:
        self.key: tuple[Path | None, bool, bool, str] | None = None
        self.handle: TextIO | None = None
        self.lock = threading.RLock()  # a warning may log
        self.stderr: StderrTarget = _StreamTarget(None)
        # The sink structlog is to write to, handed to it at the first event: configuring
        # must not import structlog, or every cold search would pay for it.
        self.sink: _Sink | None = None
        self.applied = False


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
    events_path: Path | None = None,
    echo: bool = False,
    warn: Warn | None = None,
    human: bool = False,
    least: str = "debug",
) -> None:
    """Send events to `events_path` (appending) and, with echo, those at level `least` or
    above to stderr: JSON lines, or readable lines with `human`.

    Done once per process: calling again with the same settings changes nothing, and other
    settings close the file opened before. When the file cannot be used, `warn` (by
    default a line on stderr) hears why once, and events are dropped.
    """
    warn = warn or _stderr_line
    with _state.lock:
        key = (events_path, echo, human, least)
        if _state.key == key:
            return
        _state.stderr = StderrTarget.for_stderr()
        _close_quietly(_state.handle)
        _state.handle = None
        if events_path is not None:
            _state.handle = _open_events(events_path, warn)
        _state.key = key
        _state.sink = _Sink(echo, human, warn, least)
        _state.applied = False
    if "structlog" in sys.modules:  # loaded already: hand it the sink now, as always
        _apply()


def _apply() -> None:
    """Hand structlog the sink last configured (deferred while structlog is not loaded)."""
    with _state.lock:
        if _state.applied or _state.sink is None:
            return
        sink = _state.sink
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
            logger_factory=lambda *args: sink,
            cache_logger_on_first_use=False,
        )
        _state.applied = True


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


def reopen_events() -> None:
    """Open the events file again at its path, as configured: a long-lived process (the
    daemon) whose folder was deleted under it wrote its events into the deleted file."""
    with _state.lock:
        if _state.key is None or _state.key[0] is None or _state.sink is None:
            return
        _close_quietly(_state.handle)
        _state.handle = _open_events(_state.key[0], _state.sink.warn)


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
    """The logger; a process that never configured events gets `configure_quietly` first.

    Unconfigured, structlog prints every event on stdout, where `search --json` and
    `search -` write their JSON: one warning there broke every machine reading it.
    """
    if _state.sink is not None and not _state.applied:
        _apply()
    elif not structlog.is_configured():
        configure_quietly()
    return structlog.get_logger("gbr")


def has_events_file() -> bool:
    """Whether this process chose where its events go (a command's own configure)."""
    return _state.key is not None and _state.key[0] is not None


def configure_quietly() -> None:
    """No events file; warnings and errors on stderr, one readable line each."""
    configure(None, echo=True, human=True, least="warning")


def log_info(event: str, **fields: Any) -> None:
    """`log().info`, for a callback that may never be called: structlog loads only if it is."""
    log().info(event, **fields)
