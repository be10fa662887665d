"""The daemon fills the second opinion's vectors while nobody asks anything.

Why: the second model re-scores a hybrid search's top 30 (gbr.core.rank.second_opinion), and a
passage it has not read before is embedded at the query: a package's first searches pay up
to 30 embeddings each (about 0.35 s on 2 cores). A daemon has quiet time to spare; once a
pass is done and no request has come for `quiet` seconds, it reads every node of the index
through the second model, a few at a time, into the shared embed cache and its own memo.
A request, a new pass or the shutdown stops it between two batches; the next quiet spell
starts again from the top, where texts already read cost a cache lookup.

GBR_SECOND_OPINION_FILL sets the quiet seconds (default 30; 0 fills as soon as a pass
ends); off, false or no turn it off. Indexes over FILL_MAX_CHUNKS chunks are not filled
(a million chunks would take the machine for hours).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from gbr.core.environ import SECOND_OPINION_FILL, is_off
from gbr.core.rank.search import Searcher
from gbr.core.rank.second_opinion import fill
from gbr.core.records import NO_FILTER, Hit
from gbr.core.telemetry import log

FILL_ENV = SECOND_OPINION_FILL.name
QUIET_SECONDS = 30.0
FILL_MAX_CHUNKS = 100_000
PAGE = 256  # chunk ids read and collapsed to nodes at a time


def quiet_seconds(env: Mapping[str, str]) -> float | None:
    """The quiet time before a fill, or None when `env` turns the fill off."""
    raw = SECOND_OPINION_FILL.text(env).lower()
    if is_off(raw) and raw != "0":  # a number of seconds: 0 means at once
        return None
    if not raw:
        return QUIET_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        log().warning("second_opinion_fill_setting", value=raw, using=QUIET_SECONDS)
        return QUIET_SECONDS
    return max(seconds, 0.0)


def node_pages(searcher: Searcher) -> Iterator[Sequence[Hit]]:
    """Every node of the index as a search hit (whole, as the second model reads it)."""
    ids = searcher.store.ids_matching(NO_FILTER)
    for start in range(0, len(ids), PAGE):
        page = [(i, 0.0) for i in ids[start : start + PAGE]]
        yield searcher.collapse(page, len(page))


class Filler:
    """One background thread; the daemon tells it of requests and passes."""

    def __init__(
        self,
        searcher: Callable[[], Searcher],
        quiet: float,
        stop: threading.Event,
        busy: Callable[[], bool],
    ) -> None:
        self._searcher = searcher
        self.quiet = quiet
        self._stop = stop
        self._busy = busy  # a pass is running (or the first has not finished)
        self._last_request = time.monotonic()
        self._passes = 0
        self._done_for = -1  # the pass count the last complete fill saw
        self.filled = threading.Event()  # set after each complete fill; tests wait on it
        self._thread = threading.Thread(target=self._loop, name="gbr-second-fill", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait (bounded) for the thread to see the stop: it reads the store."""
        if self._thread.is_alive():
            self._thread.join(timeout)

    def requested(self) -> None:
        self._last_request = time.monotonic()

    def pass_done(self) -> None:
        self._passes += 1
        self.filled.clear()

    def _quiet_now(self) -> bool:
        return (
            not self._stop.is_set()
            and not self._busy()
            and time.monotonic() - self._last_request >= self.quiet
        )

    def _loop(self) -> None:
        while not self._stop.wait(min(1.0, max(self.quiet, 0.1))):
            passes = self._passes
            if passes == self._done_for or not self._quiet_now():
                continue
            try:
                if self._fill_once():
                    self._done_for = passes
                    self.filled.set()
            except Exception as exc:  # a nicety: never the daemon's end
                log().warning("second_opinion_fill_failed", error=f"{type(exc).__name__}: {exc}")
                self._done_for = passes  # not again until the next pass

    def _fill_once(self) -> bool:
        searcher = self._searcher()
        second = searcher.ranking.second
        if second is None or second.failed is not None:
            return True
        chunks = searcher.store.counts()["chunks"]
        if chunks > FILL_MAX_CHUNKS:
            log().info("second_opinion_fill_skipped", chunks=chunks, limit=FILL_MAX_CHUNKS)
            return True
        started = time.monotonic()
        read = fill(second, node_pages(searcher), self._quiet_now)
        if read is None:
            return False
        log().info(
            "second_opinion_filled", nodes=read, seconds=round(time.monotonic() - started, 3)
        )
        return True
