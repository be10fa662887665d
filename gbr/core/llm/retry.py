"""When to try an LLM request again, and how long to wait first.

The waits are exponential with jitter, so that many clients hit by the same 429 do not come back
in lockstep; a `retry-after` header overrides them, because the server knows best when it will
have room. Sleep, randomness and both clocks are injectable so tests run the real retry loop
against a real server without waiting for real.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime


def is_retryable(status: int) -> bool:
    """429 and 5xx; not 501 or 505, which say the request can never work on this server."""
    return status == 429 or (500 <= status <= 599 and status not in (501, 505))


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with equal jitter: attempt n waits between half and all of base·2ⁿ."""

    initial: float = 0.5
    maximum: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    rng: Callable[[], float] = random.random
    clock: Callable[[], float] = time.monotonic
    """Measures the deadline; monotonic, so a wall-clock jump cannot stretch or cut it."""
    wall_clock: Callable[[], float] = time.time
    """Only for `retry-after` given as an HTTP date."""

    def delay(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number `retry` (1 for the first retry)."""
        asked = parse_retry_after(retry_after, self.wall_clock())
        if asked is not None:
            return asked
        ceiling = min(self.maximum, self.initial * 2 ** (retry - 1))
        return float(ceiling / 2 + self.rng() * ceiling / 2)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds from a `retry-after` value (delta-seconds or an HTTP date); None if absent or bad."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" gives a naive datetime; HTTP dates are GMT anyway
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    if not math.isfinite(seconds):  # float() accepts "nan" and "inf"
        return None
    return max(0.0, seconds)
