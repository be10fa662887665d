"""Opening the index for writing while another process holds it: wait a little, then say who.

DuckDB lets one process write a file, and a writer cannot open it while any other process
has it open, even read-only. A `search`, `status` or MCP call holds it for a moment, so an
index run that finds it busy waits a short, bounded while before it gives up with one line
naming the process DuckDB reports.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gbr.core.errors import IndexBusyError, StoreError

T = TypeVar("T")

LOCK_WAIT = 10.0  # seconds an index run waits for a busy index before it gives up
_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")


def lock_conflict(exc: BaseException) -> str | None:
    """Who holds the index, when `exc` (or its cause) is DuckDB's lock conflict; else None.

    "" when DuckDB names no process; otherwise "PID N: its command line" (or its program).
    """
    texts = [str(exc)] + ([str(exc.__cause__)] if exc.__cause__ is not None else [])
    text = next((t for t in texts if "Could not set lock" in t), None)
    if text is None:
        return None
    found = _HOLDER.search(text)
    if found is None:
        return ""
    pid = found["pid"]
    return f"PID {pid}: {_command_line(pid) or found['program']}"


def held_message(db: Path, holder: str, waited: float) -> str:
    """The one line for a file held by a process that is not a gbr writer (or is one too old
    to say so): `holder` as `lock_conflict` names it, "" when DuckDB named nobody."""
    who = f" ({holder})" if holder else ""
    return (
        f"the index {db} is in use by another process{who} and was still busy "
        f"after {waited:g} s; wait for it to finish, or stop it, then run again"
    )


def _command_line(pid: str, limit: int = 80) -> str | None:
    """What the holder runs (`gleambrctl search ...`), where /proc shows it."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    if not words:
        return None
    # `python .../bin/gleambrctl index` reads better as `gleambrctl index`.
    while len(words) > 1 and Path(words[0]).name.startswith("python"):
        words = words[1:]
    words[0] = Path(words[0]).name
    line = " ".join(" ".join(words).split())  # one line, whatever the arguments hold
    return line if len(line) <= limit else line[: limit - 3] + "..."


def open_when_free(
    open_store: Callable[[], T],
    db: Path,
    wait: float = LOCK_WAIT,
    on_busy: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`open_store()`, tried again for up to `wait` seconds while another process holds `db`.

    `on_busy(holder)` hears of the first refusal. Any other StoreError is raised at once.
    """
    deadline = time.monotonic() + wait
    delay = 0.05
    told = False
    while True:
        try:
            return open_store()
        except StoreError as exc:
            holder = lock_conflict(exc)
            if holder is None:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise IndexBusyError(held_message(db, holder, wait)) from exc
            if on_busy is not None and not told:
                on_busy(holder)
                told = True
            sleep(min(delay, left))
            delay = min(delay * 2, 0.5)
