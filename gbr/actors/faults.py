"""Deliberate crashes inside actors, so that tests and drills can exercise supervision."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any


class InjectedCrash(RuntimeError):
    """Raised where a FaultPlan says an actor should crash."""


@dataclass
class FaultPlan:
    """Crash the actor named S (`writer`, `parser-0`) on its Nth message, counted across
    restarts, or on every message; or fail its Nth start (`on_start`); or crash whatever
    stage S does with one named file (a poisonous input); or fail the index's Nth commit."""

    crash_at: dict[str, set[int]] = field(default_factory=dict)
    always: set[str] = field(default_factory=set)
    start_at: dict[str, set[int]] = field(default_factory=dict)
    poison: dict[str, set[str]] = field(default_factory=dict)  # stage -> relative paths
    commit_at: set[int] = field(default_factory=set)
    commit_files: set[str] = field(default_factory=set)  # the first commit writing each fails
    seen: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, stage: str, message: Any) -> None:
        with self._lock:
            self.seen[stage] += 1
            n = self.seen[stage]
            crash = stage in self.always or n in self.crash_at.get(stage, set())
            if crash:
                self.crashes[stage] += 1
        if crash:
            raise InjectedCrash(
                f"injected crash in {stage} on message {n} ({type(message).__name__})"
            )

    def check_start(self, stage: str) -> None:
        """Raise when the plan fails this start of `stage` (starts are counted per stage)."""
        n = self._count(f"{stage}@start")
        if n in self.start_at.get(stage, set()):
            self._crashed(f"{stage}@start")
            raise InjectedCrash(f"injected failure of {stage}'s start number {n}")

    def check_files(self, stage: str, paths: Iterable[str]) -> None:
        """Raise when `stage` handles a poisoned file, alone or with others."""
        bad = sorted(self.poison.get(stage, set()).intersection(paths))
        if bad:
            self._crashed(f"{stage}@file")
            raise InjectedCrash(f"injected crash in {stage} on {bad[0]}")

    def check_commit(self, paths: Collection[str] = ()) -> None:
        """Raise like a failed commit when the plan fails this one: the Nth commit, or the
        first one that writes one of `paths`. The cause reads like the disk's, so it is
        handled so."""
        n = self._count("commit")
        with self._lock:
            first_for_path = bool(self.commit_files.intersection(paths))
            self.commit_files.difference_update(paths)
        if n in self.commit_at or first_for_path:
            self._crashed("commit")
            raise OSError(f"injected commit failure (commit {n}): Operation not permitted")

    def _count(self, key: str) -> int:
        with self._lock:
            self.seen[key] += 1
            return self.seen[key]

    def _crashed(self, key: str) -> None:
        with self._lock:
            self.crashes[key] += 1


def parse_faults(spec: str | None) -> FaultPlan | None:
    """A plan from `GBR_FAULTS`, items joined by commas: `stage@N` (its Nth message),
    `stage@always`, `stage@start` or `stage@startN` (its first or Nth start),
    `stage@file=PATH` (whenever it handles that relative path), `commit@N` (the index
    writer's Nth commit fails as if the disk refused it), `commit@file=PATH` (the first
    commit that writes that relative path fails so).

    It lets a drill crash a running daemon's actors on purpose, from outside the process.
    """
    if not spec or not spec.strip():
        return None
    plan = FaultPlan()
    for item in spec.split(","):
        stage, sep, when = item.strip().partition("@")
        if not sep or not stage:
            raise ValueError(f"bad fault {item.strip()!r}; write it as stage@N or stage@always")
        if when == "always":
            plan.always.add(stage)
        elif when.startswith("file=") and len(when) > len("file="):
            if stage == "commit":
                plan.commit_files.add(when.removeprefix("file="))
            else:
                plan.poison.setdefault(stage, set()).add(when.removeprefix("file="))
        elif when.startswith("start"):
            n = when.removeprefix("start") or "1"
            if not (n.isdigit() and int(n) > 0):
                raise ValueError(f"bad fault {item.strip()!r}; write it as stage@start or @startN")
            plan.start_at.setdefault(stage, set()).add(int(n))
        elif when.isdigit() and int(when) > 0:
            if stage == "commit":
                plan.commit_at.add(int(when))
            else:
                plan.crash_at.setdefault(stage, set()).add(int(when))
        else:
            raise ValueError(f"bad fault {item.strip()!r}; N must be a positive number")
    return plan
