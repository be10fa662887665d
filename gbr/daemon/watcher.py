"""Watch a package tree with `watchfiles` and hand debounced batches of changes on.

watchfiles (Rust `notify`, inotify on Linux) groups the events of one save: it yields once
no new event came for `step` ms, or after `debounce` ms at most, so an editor's
write-rename-chmod dance and a `git checkout` of many files each arrive as one batch. The
filter runs on every raw event, so it is the cheap `gbr.core.parse.changes.relevant`.

watchfiles can die under us: a file whose name is not valid UTF-8 ends its iterator with
"Unable to decode path". The watcher is then restarted the supervisor's way (the same
RestartPolicy: too many restarts within the window and it gives up, state "failed"), and
each restart asks for a catch-up pass, since events were lost while it was down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import watchfiles

from gbr.actors.faults import FaultPlan
from gbr.actors.supervisor import RestartPolicy, RestartWindow, describe
from gbr.core.parse.changes import ChangeKind, ChangeSet, classify, relevant
from gbr.core.telemetry import log

WatcherState = Literal["starting", "watching", "restarting", "stopped", "failed"]
STEP_MS = 50  # quiet time that closes a batch; a single save is seen about this much later
MAX_BACKOFF = 5.0  # seconds between restarts, at most

_KINDS: dict[watchfiles.Change, ChangeKind] = {
    watchfiles.Change.added: "added",
    watchfiles.Change.modified: "modified",
    watchfiles.Change.deleted: "deleted",
}


class Watcher:
    """A thread that turns file-system events under `root` into `ChangeSet`s."""

    def __init__(
        self,
        root: Path,
        on_changes: Callable[[ChangeSet, float], None],
        debounce_ms: int = 200,
        *,
        on_restart: Callable[[], None] | None = None,
        policy: RestartPolicy | None = None,
        backoff: float = 0.2,
        faults: FaultPlan | None = None,
    ) -> None:
        self.root = root.resolve()
        self.on_changes = on_changes  # (changes, monotonic time the batch was delivered)
        self.debounce_ms = max(debounce_ms, STEP_MS)
        self.on_restart = on_restart  # after a restart: events may have been missed
        self.policy = policy or RestartPolicy(max_restarts=5, within_seconds=60.0)
        self.backoff = backoff
        self.faults = faults  # `watcher@N` fails its Nth start, `watcher@always` every one
        self.state: WatcherState = "starting"
        self.error: str | None = None  # the last failure, kept after a restart
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gbr-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self.state != "failed":
            self.state = "stopped"

    def _relative(self, path: str) -> str | None:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def _wanted(self, change: watchfiles.Change, path: str) -> bool:
        rel = self._relative(path)
        return rel is not None and relevant(_KINDS[change], rel)

    def _run(self) -> None:
        window = RestartWindow(self.policy)
        while not self._stop.is_set():
            try:
                self._watch()
                break  # stopped on purpose
            except Exception as exc:  # the daemon keeps answering; health and status show it
                self.error = describe(exc)
                log().error("watcher_failed", error=self.error, restarts=self.restarts)
                if not window.allow():
                    self.state = "failed"
                    log().error(
                        "watcher_gave_up",
                        error=self.error,
                        restarts=self.restarts,
                        within_seconds=self.policy.within_seconds,
                    )
                    return
                self.state = "restarting"
                self.restarts += 1
                delay = min(self.backoff * 2 ** (self.restarts - 1), MAX_BACKOFF)
                if self._stop.wait(delay):
                    break
                log().warning("watcher_restarted", restarts=self.restarts, error=self.error)
                if self.on_restart is not None:
                    self.on_restart()
        if self.state != "failed":
            self.state = "stopped"

    def _watch(self) -> None:
        """Watch until stopped; raises when watchfiles (or a drill) fails."""
        if self.faults is not None:
            self.faults.check("watcher", "start")
        self.state = "watching"
        log().info("watcher_started", root=str(self.root), debounce_ms=self.debounce_ms)
        for raw in watchfiles.watch(
            self.root,
            watch_filter=self._wanted,
            debounce=self.debounce_ms,
            step=STEP_MS,
            stop_event=self._stop,
            rust_timeout=1000,
            raise_interrupt=False,
        ):
            seen = time.monotonic()
            changes = classify(
                (_KINDS[kind], rel)
                for kind, path in raw
                if (rel := self._relative(path)) is not None
            )
            if changes:
                log().info(
                    "files_changed",
                    paths=sorted(changes.paths)[:20],
                    count=len(changes.paths),
                    full=changes.full,
                )
                self.on_changes(changes, seen)
