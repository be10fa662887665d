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
