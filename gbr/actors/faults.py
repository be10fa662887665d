"""Deliberate crashes inside actors, so that tests and drills can exercise supervision."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


class InjectedCrash(RuntimeError):
    """Raised where a FaultPlan says an actor should crash."""


@dataclass
class FaultPlan:
    """Crash the actor named S (`writer`, `parser-0`) on its Nth message, counted across
    restarts, or on every message."""

    crash_at: dict[str, set[int]] = field(default_factory=dict)
    always: set[str] = field(default_factory=set)
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


def parse_faults(spec: str | None) -> FaultPlan | None:
    """A plan from `stage@n[,stage@n...]` or `stage@always`, as `GBR_FAULTS` spells it.

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
        elif when.isdigit() and int(when) > 0:
            plan.crash_at.setdefault(stage, set()).add(int(when))
        else:
            raise ValueError(f"bad fault {item.strip()!r}; N must be a positive number")
    return plan
